#!/usr/bin/env python3
"""Check that an attnlab results file has the layout of docs/RESULTS.md, as h5py sees it.

    python tests/python/check_results.py <file.h5>

Prints OK and exits 0, or prints what is wrong and exits 1. Run by results_test
(H5pySeesTheDocumentedLayout) with the venv python in $ATTNLAB_PYTHON.
"""
import json
import re
import sys

import h5py
import numpy as np

STATUSES = {"running", "completed", "interrupted", "failed", "diverged"}
SIDES = {"source", "target", "queries", "keys"}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
errors = []


def expect(cond, what):
    if not cond:
        errors.append(what)
    return cond


def is_vlen_utf8(dtype):
    info = h5py.check_string_dtype(dtype)
    return info is not None and info.length is None and info.encoding == "utf-8"


def check_str_list_attr(obj, name):
    if not expect(name in obj.attrs, f"{obj.name}: missing attribute {name!r}"):
        return None
    value = obj.attrs[name]
    expect(isinstance(value, np.ndarray) and value.ndim == 1,
           f"{obj.name}.attrs[{name!r}]: expected a 1-D array, found {type(value).__name__} {getattr(value, 'shape', '')}")
    expect(is_vlen_utf8(obj.attrs.get_id(name).dtype), f"{obj.name}.attrs[{name!r}]: expected vlen UTF-8 strings")
    expect(all(isinstance(v, str) for v in value), f"{obj.name}.attrs[{name!r}]: expected str items, found {value!r}")
    return value


def check_root(f):
    for name in ("experiment", "status", "started"):
        if expect(name in f.attrs, f"/: missing attribute {name!r}"):
            expect(isinstance(f.attrs[name], str) and is_vlen_utf8(f.attrs.get_id(name).dtype),
                   f"/.attrs[{name!r}]: expected a vlen UTF-8 str, found {type(f.attrs[name]).__name__}")
    status = f.attrs.get("status")
    expect(status in STATUSES, f"/.attrs['status']: expected one of {sorted(STATUSES)}, found {status!r}")
    expect(bool(ISO.match(str(f.attrs.get("started", "")))), f"/.attrs['started']: not ISO-8601 UTC: {f.attrs.get('started')!r}")
    if status != "running":
        expect("finished" in f.attrs and ISO.match(str(f.attrs["finished"])),
               f"/.attrs['finished']: expected an ISO-8601 time for status {status!r}")
    else:
        expect("finished" not in f.attrs, "/.attrs['finished']: present while status is running")


def check_config(f):
    if "config" not in f:
        return
    d = f["config"]
    if expect(isinstance(d, h5py.Dataset) and d.shape == () and is_vlen_utf8(d.dtype),
              f"/config: expected a scalar vlen UTF-8 string dataset, found {d}"):
        expect(isinstance(d.asstr()[()], str), "/config: asstr() does not give a str")
    if "config_json" in f:  # the same config as JSON (docs/RESULTS.md, "The config as JSON")
        j = f["config_json"]
        if expect(isinstance(j, h5py.Dataset) and j.shape == (1,) and is_vlen_utf8(j.dtype),
                  f"/config_json: expected a one-element vlen UTF-8 string dataset, found {j}"):
            try:
                expect(isinstance(json.loads(j.asstr()[0]), dict), "/config_json: not a JSON object")
            except ValueError as e:
                expect(False, f"/config_json: not JSON: {e}")


def check_metrics(f):
    for group_name, group in f.get("metrics", {}).items():
        if not expect(isinstance(group, h5py.Group), f"/metrics/{group_name}: expected a group"):
            continue
        for name, d in group.items():
            expect(isinstance(d, h5py.Dataset) and d.ndim == 1 and d.dtype == np.float64 and d.maxshape == (None,),
                   f"/metrics/{group_name}/{name}: expected 1-D float64 extendible, found {d}")
            expect(d.attrs.get("long_name") == f"{group_name} {name}",
                   f"/metrics/{group_name}/{name}: attribute 'long_name' is {d.attrs.get('long_name')!r}")
        check_nxdata(group, f"/metrics/{group_name}")
    if "metrics" in f:
        check_nxentry(f, "metrics")


def check_nxentry(f, name):
    """NeXus: an NXentry whose `default` names one of its NXdata groups (what h5web opens)."""
    entry = f[name]
    expect(entry.attrs.get("NX_class") == "NXentry", f"/{name}: NX_class is {entry.attrs.get('NX_class')!r}")
    default, root_default = entry.attrs.get("default"), f.attrs.get("default")
    expect(isinstance(default, str) and default in entry, f"/{name}: default {default!r} is not a member")
    expect(isinstance(root_default, str) and root_default in f, f"/: default {root_default!r} is not a member")
    if name == "metrics" and "train" in entry:
        expect(default == "train", f"/metrics: default should be the training curves, found {default!r}")


def check_nxdata(group, where):
    """NeXus: an NXdata group whose `signal` names one of its datasets."""
    expect(group.attrs.get("NX_class") == "NXdata", f"{where}: NX_class is {group.attrs.get('NX_class')!r}")
    signal = group.attrs.get("signal")
    expect(isinstance(signal, str) and signal in group and isinstance(group[signal], h5py.Dataset),
           f"{where}: signal {signal!r} is not a dataset")
    if "loss" in group:
        expect(signal == "loss", f"{where}: a group with a loss should show it, signal is {signal!r}")


def check_samples(f):
    if "samples" not in f:
        return
    s = f["samples"]
    lengths = set()
    for name in ("source", "reference", "hypothesis"):
        if expect(name in s, f"/samples: missing {name!r}"):
            d = s[name]
            if expect(d.ndim == 1 and is_vlen_utf8(d.dtype), f"/samples/{name}: expected 1-D vlen UTF-8 strings, found {d}"):
                expect(all(isinstance(v, str) for v in d.asstr()[:]), f"/samples/{name}: items are not str")
                lengths.add(d.shape[0])
    if expect("bleu" in s, "/samples: missing 'bleu'"):
        d = s["bleu"]
        if expect(d.ndim == 1 and d.dtype == np.float64, f"/samples/bleu: expected 1-D float64, found {d}"):
            lengths.add(d.shape[0])
    expect(len(lengths) <= 1, f"/samples: columns differ in length: {sorted(lengths)}")


def check_attention(f):
    for sample_name, sample in f.get("attention", {}).items():
        if not expect(isinstance(sample, h5py.Group), f"/attention/{sample_name}: expected a group"):
            continue
        expect(isinstance(sample.attrs.get("text"), str), f"/attention/{sample_name}: missing str attribute 'text'")
        for module, d in sample.items():
            where = f"/attention/{sample_name}/{module}"
            if not expect(isinstance(d, h5py.Dataset) and d.ndim == 4 and d.dtype == np.float32,
                          f"{where}: expected 4-D float32, found {d}"):
                continue
            expect(d.attrs.get("dims") == "layers,heads,queries,keys", f"{where}: attribute 'dims' is {d.attrs.get('dims')!r}")
            q = check_str_list_attr(d, "query_tokens")
            k = check_str_list_attr(d, "key_tokens")
            if q is not None and len(q):
                expect(len(q) == d.shape[2], f"{where}: {len(q)} query tokens for {d.shape[2]} queries")
            if k is not None and len(k):
                expect(len(k) == d.shape[3], f"{where}: {len(k)} key tokens for {d.shape[3]} keys")
            layers = d.attrs.get("layers")
            expect(isinstance(layers, np.ndarray) and layers.dtype == np.int64 and layers.shape == (d.shape[0],),
                   f"{where}: attribute 'layers' should be int64 [{d.shape[0]}], found {layers!r}")
            heads = d.attrs.get("heads")
            expect(isinstance(heads, np.integer) and heads == d.shape[1],
                   f"{where}: attribute 'heads' should be {d.shape[1]}, found {heads!r}")
            expect(d.attrs.get("interpretation") == "image", f"{where}: interpretation is {d.attrs.get('interpretation')!r}")
            expect(str(d.attrs.get("long_name", "")).startswith(module), f"{where}: long_name {d.attrs.get('long_name')!r}")
            for side in ("query_side", "key_side"):
                if side in d.attrs:
                    expect(d.attrs[side] in SIDES, f"{where}: attribute {side!r} should be one of {sorted(SIDES)}, "
                                                   f"found {d.attrs[side]!r}")


def check_attention_entry(f):
    if "attention" not in f:
        return
    for sample_name, sample in f["attention"].items():
        check_nxdata(sample, f"/attention/{sample_name}")
    check_nxentry(f, "attention")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with h5py.File(sys.argv[1], "r") as f:
        check_root(f)
        check_config(f)
        check_metrics(f)
        check_samples(f)
        check_attention(f)
        check_attention_entry(f)
    if errors:
        print(f"{sys.argv[1]}: {len(errors)} layout problem(s):")
        for e in errors:
            print("  " + e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
