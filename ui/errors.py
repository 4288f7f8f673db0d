"""User errors raised by the UI's own input parsing (same family as synth's), and the
escaping of user text before Streamlit renders it as markdown."""

import re

from synth.errors import RedistributionError

# what would let text typed into a shared link render as something else: a link or an
# image (``[x](url)``, ``![x](url)``), an autolink (``<http://..>``), a bare URL that GFM
# turns into a link (``http://``, ``www.``), LaTeX (``$..$``) and Streamlit's colour
# directives (``:red[..]``). Other text -- brackets of types, PartitionSpecs -- is left as
# typed, so ``[8192{data}]`` and ``P('data', None)`` read the same in the message.
_MD = [
    (re.compile(r"\]\("), r"]\\("),
    (re.compile(r"!\["), r"\\!["),
    (re.compile(r"<"), r"\\<"),
    (re.compile(r"\$"), r"\\$"),
    (re.compile(r"(?i)([a-z][a-z0-9+.-]*):(//)"), r"\1\\:\2"),
    (re.compile(r"(?i)\b(www)\."), r"\1\\."),
    (re.compile(r":([a-z]+(?:-background)?)\["), r":\1\\["),
    (re.compile(r"\r|\n"), " "),
]


def escape_md(text) -> str:
    """``text`` safe to pass to ``st.error``/``st.warning``: shown as typed, never as a
    link, image, autolink, formula or coloured span. One line. Example: the mesh
    ``[click](http://host)`` is shown as typed, from the markdown
    ``[click]\\(http\\://host)``."""
    s = str(text)
    for pat, rep in _MD:
        s = pat.sub(rep, s)
    return s


class InputError(RedistributionError):
    """A scenario input the UI could not parse (shape, dtype, machine size...)."""
