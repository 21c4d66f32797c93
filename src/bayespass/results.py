"""Tables of results that print themselves.

Every table function of bayespass (:func:`~bayespass.stats.curve.curve_table`,
:func:`~bayespass.stats.gating.gate_table`, the leaderboard, the tables of a
run, ...) returns a :class:`Table`: a :class:`pandas.DataFrame` that also
carries its title, a caption and the columns a terminal shows. ``print(table)``
shows the title, those columns and the caption, as the CLI does
(``to_text(note=True)``); :meth:`Table.to_dataframe` is the whole
frame (what ``--format csv/json`` writes); :meth:`Table.to_html_section` is the
report's section. The CLI and the HTML report only call these, so a table reads
the same everywhere and its wording (the interval's probability, say) is set
where the numbers are made.

>>> import bayespass as bp
>>> t = bp.Table.of(pd.DataFrame({"k": [1, 10], "mean": [0.5, 0.75]}), "pass@k", note="A toy.")
>>> print(t)
== pass@k ==
 k   mean
 1 0.5000
10 0.7500
note: A toy.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

import pandas as pd

__all__ = ["Table", "name_list"]


def _fmt(floatfmt: str, v) -> str:
    """``floatfmt`` of ``v``, without the sign of a value that rounds to zero ("-0.0000" is "0.0000")."""
    text = floatfmt.format(v)
    digits = [ch for ch in text if ch.isdigit()]
    return text[1:] if text.startswith("-") and digits and set(digits) == {"0"} else text


class Table(pd.DataFrame):
    """A DataFrame with a ``title``, a ``note`` (caption) and ``brief``: the columns ``print`` shows (None: all)."""

    _metadata = ["title", "note", "brief"]
    title: str = ""
    note: str = ""
    brief: tuple | None = None

    @property
    def _constructor(self):
        return Table

    @classmethod
    def of(cls, frame: pd.DataFrame, title: str, *, note: str = "", brief: Sequence[str] | None = None) -> Table:
        """Wrap ``frame`` (not copied more than pandas does) with its title, caption and summary columns."""
        out = cls(frame)
        out.attrs.update(frame.attrs)
        out.title, out.note = str(title), str(note)
        out.brief = None if brief is None else tuple(brief)
        return out

    def to_dataframe(self) -> pd.DataFrame:
        """Return every column as a plain DataFrame (what CSV and JSON output hold)."""
        df = pd.DataFrame(self)
        df.attrs = dict(self.attrs)
        return df

    def summary(self) -> pd.DataFrame:
        """Return the columns a terminal shows (``brief``, in that order, those present)."""
        df = pd.DataFrame(self)
        if self.brief is None:
            return df
        return df[[c for c in self.brief if c in df.columns]]

    def to_text(self, *, floatfmt: str = "{:.4f}", title: bool = True, note: bool = False, width: int = 100,
                where: str = "--format csv or json") -> str:
        """Return the title line and the summary columns as aligned text; ``note``: the caption after them.

        The caption is wrapped at ``width`` characters.  With ``note``, columns the summary leaves out are named
        after it, with ``where`` every column is.
        """
        shown = self.summary()
        body = shown.to_string(index=False, float_format=lambda v: _fmt(floatfmt, v), na_rep="—")
        text = f"== {self.title} ==\n{body}" if title and self.title else body
        if note and self.note:
            text += "\n" + textwrap.fill(self.note, width, initial_indent="note: ", subsequent_indent="      ")
        hidden = [str(c) for c in self.columns if c not in shown.columns]
        if note and hidden:  # the caption may name them: say where they are
            text += "\n" + textwrap.fill(f"not shown here: {', '.join(hidden)} (every column: {where})", width,
                                          initial_indent="      ", subsequent_indent="      ", break_on_hyphens=False)
        return text

    def to_html_section(self, *, floatfmt: str = "{:.3f}") -> str:
        """Return an HTML section: the title as a heading, the caption, every column."""
        parts = [f"<h2>{html.escape(self.title)}</h2>"] if self.title else []
        if self.note:
            parts.append(f"<p class=note>{html.escape(self.note)}</p>")
        parts.append(pd.DataFrame(self).to_html(index=False, float_format=lambda v: _fmt(floatfmt, v),
                                                na_rep="—", border=0))
        return "\n".join(parts)

    def to_markdown_section(self, *, floatfmt: str = "{:.4f}") -> str:
        """Return the title as a heading, the summary columns as a Markdown (GitHub) table, then the caption."""
        shown = self.summary()
        cells = [[_cell(v, floatfmt).replace("|", "\\|") for v in row] for row in shown.itertuples(index=False)]
        right = [pd.api.types.is_numeric_dtype(shown[c]) for c in shown.columns]
        lines = [f"### {self.title}", ""] if self.title else []
        lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in shown.columns) + " |",
                  "|" + "|".join("---:" if r else "---" for r in right) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines + (["", f"*{self.note}*"] if self.note else []))

    def to_latex_section(self, *, floatfmt: str = "{:.4f}") -> str:
        """Return a LaTeX ``table`` (booktabs rules) of the summary columns, captioned by the title and caption."""
        shown = self.summary()
        right = ["r" if pd.api.types.is_numeric_dtype(shown[c]) else "l" for c in shown.columns]
        inf = {"inf": r"$\infty$", "-inf": r"$-\infty$"}
        rows = [" & ".join(inf.get(x, _latex(x)) for x in (_cell(v, floatfmt) for v in row)) + r" \\"
                for row in shown.itertuples(index=False)]
        caption = ". ".join(x for x in (_latex(self.title), _latex(self.note)) if x)
        return "\n".join([r"\begin{table}", r"\centering", rf"\caption{{{caption}}}",
                          rf"\begin{{tabular}}{{{''.join(right)}}}", r"\toprule",
                          " & ".join(_latex(str(c)) for c in shown.columns) + r" \\", r"\midrule", *rows,
                          r"\bottomrule", r"\end{tabular}", r"\end{table}"])

    def _repr_html_(self) -> str | None:
        """Return Jupyter's view: pandas' own (long tables cut short) between the title and the caption."""
        body = super()._repr_html_()
        if body is None:
            return None
        head = f"<p><b>{html.escape(self.title)}</b></p>" if self.title else ""
        return head + body + (f"<p class=note>{html.escape(self.note)}</p>" if self.note else "")

    def __str__(self) -> str:
        """Return the title, the columns a terminal shows and the caption (its caveats are part of the numbers)."""
        return self.to_text(note=True, where="t.to_dataframe()")


def name_list(names, *, total: int | None = None, most: int = 4) -> str:
    """Name configs in a caption, briefly.

    ``"a, b"``; past ``most`` names, the first ``most`` and ``"and N more"``; where they are all ``total``
    configs of the table (more than one), ``"all N configs"``.
    """
    from .validate import first_of

    names = list(names)
    if total is not None and total > 1 and len(names) == total:
        return f"all {total} configs"
    return first_of(names, most, sep=", ")


def _cell(v, floatfmt: str) -> str:
    """One cell as the text table writes it: floats by ``floatfmt``, missing values as an em dash."""
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
        return "—"
    if isinstance(v, float):
        return _fmt(floatfmt, v)
    return str(v)


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "—": "---", "<=": r"$\le$",
          ">=": r"$\ge$", "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def _latex(text: str) -> str:
    """Escape ``text`` for LaTeX (its special characters; the em dash as ``---``)."""
    out, i = [], 0
    while i < len(text):
        two = text[i:i + 2]
        if two in _LATEX:
            out.append(_LATEX[two])
            i += 2
            continue
        out.append(_LATEX.get(text[i], text[i]))
        i += 1
    return "".join(out)
