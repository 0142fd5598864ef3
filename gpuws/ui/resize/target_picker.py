"""Pick the GPU and the target: the valid layouts with memory, compute, price and the difference."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gpuws.app.cloud_slices import CloudFamily
from gpuws.core.resize.layout import LayoutError, parse_target
from gpuws.core.resize.pricing import PriceBook
from gpuws.core.resize.state import GpuMigState
from gpuws.core.resize.targets import is_vgpu
from gpuws.ui import theme
from gpuws.ui.formatting import short_gpu_name
from gpuws.ui.resize.common import success_colour
from gpuws.ui.resize.options import (
    TargetOption,
    compute_figure,
    memory_figure,
    money,
    price_difference,
    target_options,
)
from gpuws.ui.widgets import muted_label

COLUMNS = ("Target", "Memory", "Compute", "$ / h", "vs now")  # short: the picker is narrow
# Left out in this order where the picker is too narrow for every column (a 900 px window):
# Target, Memory and $ / h always stay in view, never behind a scroll bar (issue 27). Each row's
# tooltip still gives every figure.
OPTIONAL_COLUMNS = (2, 4)
CURRENT_MARK = "\u25cf "  # a dot before the current layout
CLOUD_COLUMNS = ("Instance type", "Share", "Memory", "$ / h", "vs now")
CLOUD_OPTIONAL_COLUMNS = (2, 1)  # left out in this order when the picker is narrow


def gpu_title(state: GpuMigState) -> str:
    """'GPU 1 · A100-SXM4-80GB — now full'."""
    now = state.layout.describe() if state.mig_capable else ("vGPU slice" if is_vgpu(state.name) else "full card")
    return f"GPU {state.index} \u00b7 {short_gpu_name(state.name)} \u2014 now {now}"


class TargetPicker(QWidget):
    """GPU chooser, the table of targets, a custom-layout field and (with a provider) an instance type.

    Signals: `gpu_changed(index)`, `target_chosen(target)`, `instance_type_chosen(type)`.
    """

    gpu_changed = Signal(int)
    target_chosen = Signal(str)
    instance_type_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gpus: list[GpuMigState] = []
        self.options: list[TargetOption] = []
        self._state: GpuMigState | None = None
        self._prices: PriceBook | None = None

        self.gpu_combo = QComboBox(self)
        self.gpu_combo.setPlaceholderText("not connected")
        self.gpu_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.gpu_combo.currentIndexChanged.connect(self._on_gpu_index)

        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.table.viewport().installEventFilter(self)  # its width decides which columns fit

        self.note = muted_label("", self)
        self.note.setWordWrap(True)
        self.note.hide()

        self.custom_edit = QLineEdit(self)
        self.custom_edit.setPlaceholderText("Mixed layout, e.g. 4g.40gb,2g.20gb,1g.10gb")
        self.custom_edit.returnPressed.connect(self._on_custom)
        self.custom_button = QPushButton("Plan", self)
        self.custom_button.clicked.connect(self._on_custom)
        self.custom_error = QLabel("", self)
        self.custom_error.setWordWrap(True)
        self.custom_error.setTextFormat(Qt.TextFormat.PlainText)
        self.custom_error.hide()

        self.instance_edit = QLineEdit(self)
        self.instance_edit.setPlaceholderText("Instance type, e.g. p4d.24xlarge")
        self.instance_edit.returnPressed.connect(self._on_instance_type)
        self.instance_button = QPushButton("Plan", self)
        self.instance_button.clicked.connect(self._on_instance_type)
        self.provider_row = QWidget(self)
        self.provider_caption = muted_label("Cloud instance type", self)
        # A cloud host whose type the catalog knows: its family (every fraction and the whole card)
        # with price and change against now, as `gpuws slices NAME` lists it.
        self.cloud: CloudFamily | None = None
        self.cloud_table = _table(CLOUD_COLUMNS, self)
        self.cloud_table.itemSelectionChanged.connect(self._on_cloud_selection)
        self.cloud_table.viewport().installEventFilter(self)
        self.cloud_table.hide()
        self.cloud_note = muted_label("", self)
        self.cloud_note.setWordWrap(True)
        self.cloud_note.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(muted_label("GPU", self))
        layout.addWidget(self.gpu_combo)
        layout.addSpacing(4)
        # The MIG layouts; left out for a cloud vGPU guest, whose targets are instance types.
        self.mig_section = QWidget(self)
        mig_layout = QVBoxLayout(self.mig_section)
        mig_layout.setContentsMargins(0, 0, 0, 0)
        mig_layout.setSpacing(8)
        mig_layout.addWidget(muted_label("Target layout", self.mig_section))
        mig_layout.addWidget(self.table, 1)
        mig_layout.addWidget(self.note)
        custom_row = QHBoxLayout()
        custom_row.addWidget(self.custom_edit, 1)
        custom_row.addWidget(self.custom_button)
        mig_layout.addLayout(custom_row)
        mig_layout.addWidget(self.custom_error)
        layout.addWidget(self.mig_section, 1)
        provider_layout = QVBoxLayout(self.provider_row)
        provider_layout.setContentsMargins(0, 6, 0, 0)
        provider_layout.addWidget(self.provider_caption)
        provider_layout.addWidget(self.cloud_table, 1)
        provider_layout.addWidget(self.cloud_note)
        row = QHBoxLayout()
        row.addWidget(self.instance_edit, 1)
        row.addWidget(self.instance_button)
        provider_layout.addLayout(row)
        layout.addWidget(self.provider_row, 1)
        self.provider_row.hide()

    # -- filling --------------------------------------------------------------------------------

    def set_gpus(self, gpus: list[GpuMigState], select: int | None = None) -> None:
        """Show these GPUs; keep GPU `select` (an index) chosen when present, else the first MIG one."""
        self.gpus = list(gpus)
        self.gpu_combo.blockSignals(True)  # one gpu_changed below, not one per item
        self.gpu_combo.clear()
        for state in self.gpus:
            self.gpu_combo.addItem(gpu_title(state), state.index)
        self.gpu_combo.blockSignals(False)
        indices = [s.index for s in self.gpus]
        if not indices:  # not connected: no GPU to show (a cloud host still lists its types)
            self._state, self.options = None, []
            self.table.setRowCount(0)
            self._show_sections()
            return
        if select not in indices:
            select = next((s.index for s in self.gpus if s.mig_capable), indices[0])
        self.gpu_combo.setCurrentIndex(indices.index(select))
        self._on_gpu_index(self.gpu_combo.currentIndex())

    def show_targets(self, state: GpuMigState, prices: PriceBook) -> None:
        """Fill the table with the targets of `state` priced by `prices`."""
        self._state, self._prices = state, prices
        self.options = target_options(state, prices)
        current_price = prices.layout_price(state.layout, state.model)
        self.table.blockSignals(True)
        self.table.clearSelection()
        self.table.setRowCount(len(self.options))
        pal = self.palette()
        for row, option in enumerate(self.options):
            figures = option.figures
            delta = price_difference(current_price, figures.price_per_hour, per_hour=False) if option.selectable else ""
            texts = (
                (CURRENT_MARK if option.current else "") + option.target,
                memory_figure(figures.memory_gib),
                compute_figure(figures, short=True),
                money(figures.price_per_hour, per_hour=False),
                "" if option.current else delta,
            )
            tip = ", ".join(f"{name}: {text.removeprefix(CURRENT_MARK)}"
                            for name, text in zip(COLUMNS, texts, strict=True) if text)
            for col, text in enumerate(texts):
                self.table.setItem(row, col, _cell(text, tip, col, pal, key=option.target, current=option.current,
                                                   selectable=option.selectable))
        self.table.blockSignals(False)
        self._fit_columns()
        notes = sorted({o.note for o in self.options if o.note})
        self.note.setText("; ".join(notes))
        self.note.setVisible(bool(notes))
        can_mig = state.mig_capable
        for widget in (self.custom_edit, self.custom_button):
            widget.setEnabled(can_mig)
        self.custom_error.hide()
        self._show_sections()

    def set_provider(self, kind: str | None) -> None:
        """Offer an instance-type change when the host has a cloud provider configured."""
        self.provider_row.setVisible(bool(kind))
        self.provider_caption.setText(f"Cloud instance type ({kind})" if kind else "Cloud instance type")

    def set_cloud_family(self, family: CloudFamily | None) -> None:
        """List the host's instance-type family (None: the host names no type the catalog knows)."""
        self.cloud = family
        self.cloud_table.blockSignals(True)
        self.cloud_table.clearSelection()
        options = family.options if family is not None else ()
        self.cloud_table.setRowCount(len(options))
        pal = self.palette()
        now = family.now_price_per_hour if family is not None else None
        for row, option in enumerate(options):
            t = option.itype
            delta = "" if option.current else price_difference(now, option.price_per_hour, per_hour=False)
            price = money(option.price_per_hour, per_hour=False)
            if option.price_source == "override":
                price += "*"
            texts = ((CURRENT_MARK if option.current else "") + t.name, t.fraction_text,
                     _gib(t.framebuffer_mib),
                     price, delta)
            tip = (f"{t.name}: {t.fraction_text} of an {t.card}"
                   + (f" (vGPU {t.vgpu_profile})" if t.vgpu_profile else "")
                   + f", {t.framebuffer_mib} MiB, {t.vcpus} vCPUs, {t.memory_gib:g} GiB memory; "
                   + (f"{money(option.price_per_hour)}" if option.price_per_hour is not None else "no price known")
                   + (" (this host's own price)" if option.price_source == "override" else ""))
            for col, text in enumerate(texts):
                # The current type is not a target: the host runs as it.
                self.cloud_table.setItem(row, col, _cell(text, tip, col, pal, key=t.name, current=option.current,
                                                         selectable=not option.current))
        self.cloud_table.blockSignals(False)
        self.cloud_table.setVisible(family is not None)
        if family is not None:
            current = family.current
            card = current.itype.card if current else "card"
            self.provider_caption.setText(f"Instance types of one {card} ({family.provider}, "
                                          f"{family.region or 'no region set'})")
            self.instance_edit.setPlaceholderText("Another instance type")
            self.cloud_note.setText(_cloud_note(family))
            self.cloud_note.setVisible(bool(self.cloud_note.text()))
            self._fit_cloud_columns()
        else:
            self.cloud_note.hide()
            self.instance_edit.setPlaceholderText("Instance type, e.g. p4d.24xlarge")
        self._show_sections()

    def _show_sections(self) -> None:
        """A cloud host whose GPU is not MIG-capable changes only by instance type: its list takes
        the room of the (then empty) MIG layouts."""
        cloud_only = self.cloud is not None and not (self._state is not None and self._state.mig_capable)
        self.mig_section.setVisible(not cloud_only)

    def select_instance_type(self, name: str) -> bool:
        """Select the family's row for `name` (emits instance_type_chosen); False when not listed."""
        for row in range(self.cloud_table.rowCount()):
            item = self.cloud_table.item(row, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == name and \
                    item.flags() & Qt.ItemFlag.ItemIsSelectable:
                self.cloud_table.selectRow(row)
                return True
        return False

    def set_busy(self, busy: bool) -> None:
        """Lock the picker while a resize runs."""
        for widget in (self.gpu_combo, self.table, self.custom_edit, self.custom_button,
                       self.instance_edit, self.instance_button, self.cloud_table):
            widget.setEnabled(not busy)
        if not busy and self._state is not None:
            for widget in (self.custom_edit, self.custom_button):
                widget.setEnabled(self._state.mig_capable)

    def select_target(self, target: str) -> bool:
        """Select the row for `target` (emits target_chosen); False when it is not listed."""
        for row, option in enumerate(self.options):
            if option.target == target and option.selectable:
                self.table.selectRow(row)
                return True
        return False

    def current_gpu(self) -> int | None:
        data = self.gpu_combo.currentData()
        return int(data) if data is not None else None

    def _fit_columns(self) -> None:
        """Show every column that fits the table's width, leaving out OPTIONAL_COLUMNS in order."""
        header = self.table.horizontalHeader()
        for col in OPTIONAL_COLUMNS:
            self.table.setColumnHidden(col, False)  # measured while shown
        need = {col: max(header.sectionSizeHint(col), self.table.sizeHintForColumn(col)) for col in range(len(COLUMNS))}
        room = self.table.viewport().width()
        shown = set(need)
        for col in OPTIONAL_COLUMNS:
            if sum(need[c] for c in shown) <= room:
                break
            shown.discard(col)
        for col in OPTIONAL_COLUMNS:
            self.table.setColumnHidden(col, col not in shown)

    def _fit_cloud_columns(self) -> None:
        header = self.cloud_table.horizontalHeader()
        for col in CLOUD_OPTIONAL_COLUMNS:
            self.cloud_table.setColumnHidden(col, False)
        need = {col: max(header.sectionSizeHint(col), self.cloud_table.sizeHintForColumn(col))
                for col in range(len(CLOUD_COLUMNS))}
        shown = set(need)
        for col in CLOUD_OPTIONAL_COLUMNS:
            if sum(need[c] for c in shown) <= self.cloud_table.viewport().width():
                break
            shown.discard(col)
        for col in CLOUD_OPTIONAL_COLUMNS:
            self.cloud_table.setColumnHidden(col, col not in shown)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Refit the columns when the table's width changes."""
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_columns()
        elif watched is self.cloud_table.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_cloud_columns()
        return super().eventFilter(watched, event)

    # -- events ---------------------------------------------------------------------------------

    def _on_gpu_index(self, combo_index: int) -> None:
        if 0 <= combo_index < len(self.gpus):
            self.gpu_changed.emit(self.gpus[combo_index].index)

    def _on_selection(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        if len(rows) == 1:
            option = self.options[rows.pop()]
            if option.selectable:
                self.target_chosen.emit(option.target)

    def _on_custom(self) -> None:
        text = self.custom_edit.text().strip()
        state = self._state
        if not text or state is None or state.model is None:
            return
        try:
            layout = parse_target(text, state.model)
        except LayoutError as exc:
            self.custom_error.setText(str(exc))
            self.custom_error.setPalette(_error_palette(self.custom_error))
            self.custom_error.show()
            return
        self.custom_error.hide()
        self.table.clearSelection()
        self.target_chosen.emit(layout.describe())

    def _on_cloud_selection(self) -> None:
        rows = {i.row() for i in self.cloud_table.selectedItems()}
        if len(rows) == 1:
            item = self.cloud_table.item(rows.pop(), 0)
            if item is not None:
                self.table.clearSelection()
                self.instance_type_chosen.emit(str(item.data(Qt.ItemDataRole.UserRole)))

    def _on_instance_type(self) -> None:
        text = self.instance_edit.text().strip()
        if text:
            self.table.clearSelection()
            self.instance_type_chosen.emit(text)


def _table(columns: tuple[str, ...], parent: QWidget) -> QTableWidget:
    """A read-only, single-row-selection table with these column titles (first column stretches)."""
    table = QTableWidget(0, len(columns), parent)
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().hide()
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setShowGrid(False)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for col in range(1, len(columns)):
        header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
    return table


def _gib(mib: int) -> str:
    """3072 -> '3 GiB', 23034 -> '22.5 GiB'."""
    gib = mib / 1024
    return f"{gib:.0f} GiB" if abs(gib - round(gib)) < 0.05 else f"{gib:.1f} GiB"


def _cloud_note(family: CloudFamily) -> str:
    """What the family's prices rest on, in words (empty when every row is priced from the catalog)."""
    notes = []
    if any(o.price_source == "override" for o in family.options):
        notes.append("* this host's own price (--slice-price)")
    if not family.catalog_prices_used:
        notes.append(f"catalog prices are in USD; this host is priced in {family.currency}")
    elif any(o.price_per_hour is None for o in family.options):
        notes.append("\u2014: no published price read for this region; set one with --slice-price TYPE=PRICE")
    return "; ".join(notes)


def _error_palette(label: QLabel) -> QPalette:
    pal = label.palette()
    pal.setColor(QPalette.ColorRole.WindowText, theme.error_colour(pal))
    return pal


def _cell(text: str, tip: str, col: int, pal: QPalette, *, key: str, current: bool,
          selectable: bool) -> QTableWidgetItem:
    """One cell of a target table (MIG layouts or instance types): figures right-aligned, the
    current row bold, a row that is no target only enabled, and the price change (column 4)
    coloured by its sign (cheaper green, dearer amber)."""
    item = QTableWidgetItem(text)
    item.setToolTip(tip)
    if col:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if current:
        font = QFont(item.font())
        font.setBold(True)
        item.setFont(font)
    if not selectable:
        item.setFlags(Qt.ItemFlag.ItemIsEnabled)
    if col == 4 and not current:
        if text.startswith("\u2212"):
            item.setForeground(success_colour(pal))
        elif text.startswith("+"):
            item.setForeground(theme.warning_colour(pal))
    item.setData(Qt.ItemDataRole.UserRole, key)
    return item
