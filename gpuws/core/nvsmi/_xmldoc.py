"""Safe parsing of untrusted XML from a remote host into an ElementTree plus its comments.

defusedxml refuses entity declarations (billion laughs, external entities); every failure comes
out as a ParseError with a line number, never as an expat or defusedxml exception.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi._values import describe


@dataclass(frozen=True)
class XmlDocument:
    """A parsed document: its root element and the text of every comment in it."""

    root: ET.Element
    comments: tuple[str, ...]


class _CommentKeepingTarget:
    """Parser target that builds the tree and records comments, including those outside the root

    (ElementTree's own `insert_comments` drops comments before the root element, which is where a
    generator would put a banner such as the simulation marker).
    """

    def __init__(self) -> None:
        self._builder = ET.TreeBuilder()
        self.comments: list[str] = []

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:
        return self._builder.start(tag, attrs)

    def end(self, tag: str) -> ET.Element:
        return self._builder.end(tag)

    def data(self, data: str) -> None:
        self._builder.data(data)

    def comment(self, text: str) -> None:
        self.comments.append(text)

    def close(self) -> ET.Element:
        return self._builder.close()


_END_TAG = "</nvidia_smi_log>"


def split_document(text: str) -> tuple[str, list[str]]:
    """The `nvidia-smi -q -x` document in `text`, and the lines printed before or after it.

    nvidia-smi prints warnings beside the XML ("WARNING: infoROM is corrupted at gpu ...", a
    library notice), on stderr, which a script that merges the streams puts around the document.
    The document runs from the first line that starts with `<` to the last `</nvidia_smi_log>`;
    without such a line the document is "" and every line is returned as printed.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("<")), None)
    if start is None:
        return "", [line.strip() for line in lines if line.strip()]
    end = max((i for i in range(start, len(lines)) if _END_TAG in lines[i]), default=len(lines) - 1)
    tail = lines[end][lines[end].rfind(_END_TAG) + len(_END_TAG):] if _END_TAG in lines[end] else ""
    document = "\n".join([*lines[start:end], lines[end][:len(lines[end]) - len(tail)]])
    around = [*lines[:start], tail, *lines[end + 1:]]
    return document, [line.strip() for line in around if line.strip()]


def parse_xml_document(text: str, what: str = "nvidia-smi XML") -> XmlDocument:
    """Parse `text`; any problem is a ParseError that starts with `what`."""
    if not text.strip():
        raise ParseError(f"{what} is empty (the command printed nothing)")
    if not text.lstrip().startswith("<"):
        first_line = text.strip().splitlines()[0]
        raise ParseError(f"{what} expected, but the command printed {describe(first_line)}")
    target = _CommentKeepingTarget()
    parser = DefusedXMLParser(target=target, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    try:
        parser.feed(text)
        root = parser.close()
    except ET.ParseError as exc:
        line = exc.position[0] if exc.position else "?"
        raise ParseError(f"{what} is truncated or malformed at line {line}") from exc
    except UnicodeError as exc:  # text holding undecodable bytes (lone surrogates) expat cannot take
        raise ParseError(f"{what} is not valid text (undecodable bytes)") from exc
    except DefusedXmlException as exc:
        # nvidia-smi never declares entities; a document that does is hostile or not nvidia-smi's.
        raise ParseError(f"{what} declares entities, which nvidia-smi never does; refusing to expand them") from exc
    return XmlDocument(root=root, comments=tuple(target.comments))
