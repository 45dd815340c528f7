"""Recorded attention of one sample, with its tokens and axes named.

    att = run.attention(sample="i'm home .")
    att.modules                                   # ["decoder_cross", "decoder_self", "encoder_self"]
    m = att.weights("decoder_cross", layer=1)     # numpy [heads, queries, keys] + tokens
    att.show("encoder_self", layer=2)             # heatmaps per head, as runner plot draws them

Layers and heads are numbered from 1, as `runner plot` and `runner report` label them. A module
holds the layers the run recorded (the file's `layers` attribute), not always all of them.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from .errors import ResultsError

__all__ = ["Attention", "AttentionMap"]


@dataclass
class AttentionMap:
    """One module's weights of one layer: weights [heads, queries, keys], the tokens along the two
    axes and what each axis indexes (source, target, queries or keys)."""
    module: str
    layer: int                # numbered from 1
    weights: np.ndarray       # float32 [heads, queries, keys]
    query_tokens: list[str]
    key_tokens: list[str]
    query_side: str = ""
    key_side: str = ""

    @property
    def heads(self) -> int:
        return int(self.weights.shape[0])

    def head(self, h: int) -> np.ndarray:
        """Head h (numbered from 1): [queries, keys]."""
        if not 1 <= h <= self.heads:
            raise ResultsError(f"{self.module} layer {self.layer} has heads 1..{self.heads}; there is no head {h}")
        return self.weights[h - 1]

    def frame(self, h: int | None = None):
        """A pandas DataFrame of one head (default the mean over heads), queries x keys, labelled by
        the tokens."""
        import pandas as pd
        w = self.weights.mean(axis=0) if h is None else self.head(h)
        q = self.query_tokens or [str(i) for i in range(w.shape[0])]
        k = self.key_tokens or [str(i) for i in range(w.shape[1])]
        return pd.DataFrame(w, index=pd.Index(_unique(q), name="query"), columns=pd.Index(_unique(k), name="key"))


def _unique(tokens: list[str]) -> list[str]:
    """Tokens as labels: a repeated token gets its position, so labels stay unique."""
    seen: dict[str, int] = {}
    out = []
    for i, t in enumerate(tokens):
        out.append(t if t not in seen else f"{t} ({i})")
        seen[t] = i
    return out


@dataclass
class _Module:
    weights: np.ndarray      # [layers, heads, queries, keys]
    layers: list[int]        # as stored: 0-based
    query_tokens: list[str]
    key_tokens: list[str]
    query_side: str
    key_side: str


@dataclass
class Attention:
    """Every recorded module of one sample."""
    sample: str
    path: str
    _modules: dict[str, _Module] = field(default_factory=dict, repr=False)

    @classmethod
    def _read(cls, f, sample: str, path: str) -> "Attention":
        from .results import _attr, _text
        att = cls(sample, path)
        group = None
        for name, g in f["attention"].items():
            if _text(g.attrs.get("text", name)) == sample:
                group = g
                break
        if group is None:
            raise ResultsError(f"results file {path} recorded no attention for sample {sample!r}")
        for module, d in group.items():
            w = np.asarray(d[()], dtype=np.float32)
            if w.ndim != 4:
                raise ResultsError(f"results file {path}: /attention/{group.name}/{module} has shape {w.shape}, "
                                   f"expected [layers, heads, queries, keys]")
            a = {k: _attr(v) for k, v in d.attrs.items()}
            layers = a.get("layers")
            layers = [int(x) for x in (layers if isinstance(layers, list) else [layers])] \
                if layers is not None else list(range(w.shape[0]))
            att._modules[module] = _Module(w, layers, list(a.get("query_tokens", []) or []),
                                           list(a.get("key_tokens", []) or []),
                                           str(a.get("query_side", "")), str(a.get("key_side", "")))
        return att

    @property
    def modules(self) -> list[str]:
        return sorted(self._modules)

    def _module(self, module: str) -> _Module:
        if module not in self._modules:
            raise ResultsError(f"results file {self.path} recorded no module '{module}' for sample {self.sample!r}"
                               f" (it has: {', '.join(self.modules)})")
        return self._modules[module]

    def layers(self, module: str) -> list[int]:
        """The recorded layers of a module, numbered from 1."""
        return [l + 1 for l in self._module(module).layers]

    def __getitem__(self, module: str) -> np.ndarray:
        """All recorded layers of a module: float32 [layers, heads, queries, keys]."""
        return self._module(module).weights

    def weights(self, module: str, layer: int | None = None) -> AttentionMap:
        """One layer (numbered from 1; default the last recorded) as an AttentionMap."""
        m = self._module(module)
        shown = [l + 1 for l in m.layers]
        if layer is None:
            layer = shown[-1]
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise TypeError(f"layer must be a whole number (layers are numbered from 1: {shown}); "
                            f"got {type(layer).__name__} {layer!r}")
        if layer not in shown:
            raise ResultsError(f"results file {self.path}: module '{module}' has layers {shown} (numbered from 1, "
                               f"as runner plot labels them); there is no layer {layer}")
        row = shown.index(layer)
        return AttentionMap(module, layer, m.weights[row], m.query_tokens, m.key_tokens, m.query_side, m.key_side)

    def show(self, module: str, layer: int | None = None, *, heads: list[int] | None = None, ax=None,
             figsize: tuple[float, float] | None = None, pad: bool = True):
        """Heatmaps, one per head (in a row; every recorded layer as a row when layer is None),
        in runner plot's colours: white to dark red from 0 to the largest weight shown, keys along
        x, queries along y, a colour bar. pad=False leaves out the rows and columns of `<pad>`
        tokens. Returns the matplotlib Figure."""
        import matplotlib.pyplot as plt
        m = self._module(module)
        rows = [self.weights(module, layer)] if layer is not None else [self.weights(module, l) for l in self.layers(module)]
        if heads is not None and (isinstance(heads, (str, bytes)) or not isinstance(heads, (list, tuple, range))
                                  or not all(isinstance(h, (int, np.integer)) and not isinstance(h, bool)
                                             for h in heads)):
            raise TypeError(f"heads must be a list of head numbers (from 1), e.g. heads=[{heads!r}]; "
                            f"got {type(heads).__name__} {heads!r}")
        head_list = list(heads) if heads else list(range(1, rows[0].heads + 1))
        query_tokens, key_tokens = list(m.query_tokens), list(m.key_tokens)
        keep_q = [i for i, t in enumerate(query_tokens) if pad or t != "<pad>"] if query_tokens else None
        keep_k = [i for i, t in enumerate(key_tokens) if pad or t != "<pad>"] if key_tokens else None
        if keep_q is not None:
            query_tokens = [query_tokens[i] for i in keep_q]
        if keep_k is not None:
            key_tokens = [key_tokens[i] for i in keep_k]

        def cut(grid):
            if keep_q is not None:
                grid = grid[keep_q, :]
            if keep_k is not None:
                grid = grid[:, keep_k]
            return grid
        grids = [[cut(r.head(h)) for h in head_list] for r in rows]
        finite = [g[np.isfinite(g)] for row in grids for g in row]
        vmax = max((float(x.max()) for x in finite if x.size), default=1.0) or 1.0
        nq, nk = grids[0][0].shape
        if figsize is None:
            cell = 0.32
            figsize = (max(3.0, len(head_list) * (nk * cell + 0.9) + 1.2), max(2.2, len(rows) * (nq * cell + 0.9) + 0.6))
        fig, axes = plt.subplots(len(rows), len(head_list), figsize=figsize, squeeze=False,
                                 sharex=True, sharey=True, layout="constrained")
        image = None
        for r, (amap, row) in enumerate(zip(rows, grids)):
            for c, (h, w) in enumerate(zip(head_list, row)):
                axis = axes[r][c]
                image = axis.imshow(np.ma.masked_invalid(w), cmap="Reds", vmin=0, vmax=vmax, aspect="auto")
                if r == 0:
                    axis.set_title(f"head {h}")
                if c == 0:
                    axis.set_ylabel(f"layer {amap.layer}\nqueries" if len(rows) > 1 else "queries")
                if r == len(rows) - 1:
                    axis.set_xlabel("keys")
                if key_tokens:
                    axis.set_xticks(range(nk), key_tokens, rotation=90)
                if query_tokens:
                    axis.set_yticks(range(nq), query_tokens)
        fig.suptitle(f"{module}: {self.sample}" + (f" (layer {layer})" if layer is not None else ""))
        fig.colorbar(image, ax=axes, shrink=0.8)
        # Returned, not left open in pyplot: as a cell's last line Jupyter shows the returned figure
        # once (an open one would be drawn a second time by the inline backend).
        plt.close(fig)
        return fig

    def __repr__(self) -> str:
        parts = [f"{m} {list(self._modules[m].weights.shape)}" for m in self.modules]
        return f"<attnlab.Attention {self.sample!r}: {', '.join(parts)}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(m)}</td><td>{', '.join(map(str, self.layers(m)))}</td>"
            f"<td>{self._modules[m].weights.shape[1]}</td>"
            f"<td>{html.escape(' '.join(self._modules[m].query_tokens))}</td>"
            f"<td>{html.escape(' '.join(self._modules[m].key_tokens))}</td></tr>" for m in self.modules)
        return (f"<b>attention of {html.escape(self.sample)}</b><table><tr><th>module</th><th>layers</th>"
                f"<th>heads</th><th>queries</th><th>keys</th></tr>{rows}</table>")
