"""How the cluster's Go components are built: CoreDNS from a main package of our own that imports only
the plugins we chose, cached under a directory that changes with that choice."""

from __future__ import annotations

import dataclasses
import json
import re
import stat
from pathlib import Path

from sregym.cluster import binaries
from sregym.cluster.binaries import COREDNS, COREDNS_PLUGINS, KUBERNETES, wrapper_main
from sregym.cluster.local.config import COREFILE

# A Corefile directive -> the CoreDNS package that registers it, where the names differ.
PACKAGE_OF = {"prometheus": "metrics"}


def _imports(source: str) -> list[tuple[str, str]]:
    return re.findall(r'^\t(_ |)"([^"]+)"$', source, flags=re.M)


def test_coredns_main_imports_coremain_and_blank_imports_each_plugin():
    source = wrapper_main(COREDNS)
    assert source.startswith("// Generated") and "\npackage main\n" in source
    imports = _imports(source)
    assert ("", "github.com/coredns/coredns/coremain") in imports
    assert {pkg for blank, pkg in imports if blank} == {
        *(f"github.com/coredns/coredns/plugin/{p}" for p in COREDNS_PLUGINS), "github.com/coredns/caddy/onevent"}
    assert source.rstrip().endswith("func main() { coremain.Run() }")
    # the stock binary's plugin list with every cloud SDK is not linked in
    assert "github.com/coredns/coredns/core/plugin" not in {pkg for _, pkg in imports}


def test_every_directive_of_the_clusters_corefile_is_compiled_in():
    directives = set(re.findall(r"^ {4}(\w+)", COREFILE, flags=re.M))
    assert {"kubernetes", "template", "cache", "prometheus"} <= directives
    assert {PACKAGE_OF.get(d, d) for d in directives} <= set(COREDNS_PLUGINS)


def test_plugins_an_sre_may_add_while_repairing_a_corefile_are_compiled_in():
    wanted = {"errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache", "loop", "reload",
              "loadbalance", "log", "hosts", "rewrite", "template", "whoami", "k8s_external", "autopath", "file"}
    assert {PACKAGE_OF.get(d, d) for d in wanted} <= set(COREDNS_PLUGINS)
    assert not set(COREDNS_PLUGINS) & {"route53", "azure", "clouddns", "etcd", "nomad", "trace", "dnssec"}


def test_cache_directory_changes_with_the_plugin_set_only():
    fewer = dataclasses.replace(COREDNS, main_imports=COREDNS.main_imports[:-1])
    assert COREDNS.directory.name.startswith(f"coredns-{COREDNS.version}-m")
    assert fewer.directory != COREDNS.directory
    assert dataclasses.replace(COREDNS).directory == COREDNS.directory  # stable, not random
    # components built from their own commands keep their directory: warm machines keep them
    assert KUBERNETES.directory.name == f"kubernetes-{KUBERNETES.version}"
    assert wrapper_main(KUBERNETES) == ""


def test_a_coredns_build_compiles_the_generated_main_package(tmp_path, monkeypatch):
    # a stand-in `go` that records its arguments and the wrapper module it was run in
    calls = tmp_path / "calls.jsonl"
    fake = tmp_path / "fakebin" / "go"
    fake.parent.mkdir()
    fake.write_text(f"""#!/usr/bin/env python3
import json, os, sys, pathlib
args = sys.argv[1:]
main = pathlib.Path("main.go")
with open({str(calls)!r}, "a") as f:
    f.write(json.dumps({{"args": args, "main": main.read_text() if main.exists() else None}}) + "\\n")
if args[0] == "build":
    out = args[args.index("-o") + 1]
    pathlib.Path(out).write_text("binary")
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}:{Path('/usr/bin')}:{Path('/bin')}")
    monkeypatch.setenv("SREGYM_CACHE", str(tmp_path / "cache"))
    out = binaries.build(COREDNS, log=lambda _: None)
    assert out == COREDNS.directory and (out / "coredns").read_text() == "binary"
    runs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [r["args"][0] for r in runs] == ["get", "build"]
    assert all(a.endswith(f"@{COREDNS.version}") for a in runs[0]["args"][1:])
    assert runs[1]["args"][-1] == "." and runs[1]["main"] == wrapper_main(COREDNS)
    record = json.loads(out.with_name(out.name + ".build.json").read_text())
    assert record["variant"] == COREDNS.variant and record["component"] == "coredns"
