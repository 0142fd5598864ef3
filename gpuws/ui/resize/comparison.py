"""Current layout versus target: memory, compute share, price per hour, and the difference."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from gpuws.ui import theme
from gpuws.ui.resize.common import Section, set_text_colour, success_colour
from gpuws.ui.resize.options import LayoutFigures, compute_figure, memory_figure, money, price_difference
from gpuws.ui.widgets import heading, muted_label

ARROW = "\u2192"


class _LayoutColumn(QWidget):
    """A caption ('Now'), the layout in large type, then memory / compute / instances / price rows."""

    ROWS = ("Memory", "Compute", "Instances", "Price")

    def __init__(self, caption: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addWidget(muted_label(caption, self))
        self.title = heading("—", 1.35, self)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.title)
        self.hint = muted_label("", self)
        self.hint.setWordWrap(True)
        layout.addWidget(self.hint)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(2)
        self.values: dict[str, QLabel] = {}
        self._keys: list[QLabel] = []
        for row, key in enumerate(self.ROWS):
            value = QLabel("", self)
            value.setTextFormat(Qt.TextFormat.PlainText)
            self._keys.append(muted_label(key, self))
            grid.addWidget(self._keys[-1], row, 0)
            grid.addWidget(value, row, 1)
            self.values[key] = value
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        layout.addStretch(1)

    def show_layout(self, title: str, figures: LayoutFigures | None, hint: str = "") -> None:
        """Show a layout; without figures only the title and a hint (e.g. a provider instance type)."""
        self.title.setText(title)
        if figures is None:
            hint = hint or "memory and compute as the instance type defines"
        self.hint.setText(hint)
        self.hint.setVisible(bool(hint))
        if figures is None:
            texts = dict.fromkeys(self.ROWS, "")
        else:
            instances = "whole card, MIG off" if not figures.instances else str(figures.instances)
            if figures.instances > 1 and figures.price_per_hour is not None and "," not in title:
                instances += f" \u00d7 {money(figures.price_per_hour / figures.instances)}"
            texts = {
                "Memory": memory_figure(figures.memory_gib),
                "Compute": compute_figure(figures),
                "Instances": instances,
                "Price": money(figures.price_per_hour),
            }
        for key, label in self.values.items():
            label.setText(texts[key])
        for label in [*self.values.values(), *self._keys]:  # no figures: no empty rows either
            label.setVisible(figures is not None)


class ComparisonCard(Section):
    """'Now' → 'Target' side by side and the price difference in large coloured type."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Current vs target", parent)
        self.before = _LayoutColumn("Now", self)
        self.after = _LayoutColumn("Target", self)
        arrow = heading(ARROW, 1.6, self)
        set_text_colour(arrow, theme.muted_text_colour(self.palette()))
        self.difference = heading("", 2.0, self)
        self.difference.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.difference_caption = muted_label("price difference", self)
        self.difference_caption.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.price_source = muted_label("", self)
        self.price_source.setWordWrap(True)

        # Now -> Target on one row; the difference under them, right-aligned and large, so the
        # card stays readable in a narrow window.
        grid = QGridLayout()
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(2)
        grid.addWidget(self.before, 0, 0)
        grid.addWidget(arrow, 0, 1, Qt.AlignmentFlag.AlignVCenter)
        grid.addWidget(self.after, 0, 2)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(2, 1)
        self.body.addLayout(grid)
        difference_row = QGridLayout()
        difference_row.setVerticalSpacing(0)
        difference_row.addWidget(self.price_source, 0, 0, 2, 1, Qt.AlignmentFlag.AlignBottom)
        difference_row.addWidget(self.difference_caption, 0, 1)
        difference_row.addWidget(self.difference, 1, 1)
        difference_row.setColumnStretch(0, 1)
        self.body.addLayout(difference_row)

    def show_change(
        self,
        before: tuple[str, LayoutFigures | None],
        after: tuple[str, LayoutFigures | None],
        *,
        after_hint: str = "",
        price_source: str = "",
    ) -> None:
        """Show (title, figures) now and at the target; figures None where they are not known."""
        self.before.show_layout(*before)
        self.after.show_layout(*after, hint=after_hint)
        old = before[1].price_per_hour if before[1] else None
        new = after[1].price_per_hour if after[1] else None
        text = price_difference(old, new)
        self.difference.setText(text or "—")
        pal = self.palette()
        if text.startswith("\u2212"):
            colour = success_colour(pal)
        elif text.startswith("+"):
            colour = theme.warning_colour(pal)
        else:
            colour = pal.color(pal.ColorRole.WindowText)
        set_text_colour(self.difference, colour)
        self.price_source.setText(_SOURCES.get(price_source, ""))


_SOURCES = {
    "override": "prices: this host's slice prices",
    "profile": "prices: this host's price per hour, by compute share",
    "reference": "prices: illustrative reference price (set this host's price in its profile)",
    "none": "no price set for this host",
    "catalog": "prices: the instance-type catalog's on-demand price for the host's region "
               "(gpuws slices NAME lists its sources)",
}
