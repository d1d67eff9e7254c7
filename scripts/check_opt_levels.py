#!/usr/bin/env python3
"""Checks that every C++ rule whose copts set an optimisation level (-O3 on
the kernels, -O2 on the data pipeline) is compiled at that level.

A `--per_file_copt` of .bazelrc comes after a rule's copts on the compiler's
command line, so a per-file -O2 silently overrides a rule's -O3 (until
2026-11-29 the servers' gradient sum, Adam and gradient scan and the CPU
engine's kernels ran scalar loops in every build that way). This reads the
compile actions Bazel would run (`bazel aquery`, the default build) and
fails naming each source whose last -O is not its rule's.

  python3 scripts/check_opt_levels.py      (from the repository root)
"""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def bazel(*args):
    return subprocess.run(["bazel", *args], check=True, capture_output=True,
                          text=True).stdout


def last_opt_level(flags):
    levels = [f for f in flags if f.startswith("-O")]
    return levels[-1] if levels else None


def main():
    query = 'attr(copts, "-O", kind("cc_library|cc_binary|cc_test", //...))'
    rules = {}
    # (Bazel 4's query writes no JSON; its XML names each rule's copts.)
    for rule in ET.fromstring(bazel("query", query, "--output=xml")).iter("rule"):
        copts = [s.get("value") for lst in rule.iter("list")
                 if lst.get("name") == "copts" for s in lst.iter("string")]
        want = last_opt_level(copts)
        if want:
            rules[rule.get("name")] = want
    if not rules:
        print("check_opt_levels: no rule sets an optimisation level "
              "(the query found none)")
        return 1
    labels = " + ".join(sorted(rules))
    graph = json.loads(bazel("aquery", f'mnemonic("CppCompile", {labels})',
                             "--output=jsonproto") or "{}")
    target_label = {t["id"]: t["label"] for t in graph.get("targets", [])}
    wrong, checked = [], 0
    for action in graph.get("actions", []):
        label = target_label.get(action.get("targetId"))
        if label not in rules:
            continue
        args = action["arguments"]
        sources = [a for a in args if a.endswith((".cc", ".cpp", ".c"))]
        source = sources[-1] if sources else "?"
        got = last_opt_level(args)
        checked += 1
        if got != rules[label]:
            wrong.append(f"{source} ({label}): compiled at {got}, "
                         f"its rule's copts say {rules[label]}")
    if checked == 0:
        print("check_opt_levels: no compile action found for", labels)
        return 1
    if wrong:
        print("check_opt_levels: a later flag (a --per_file_copt in "
              ".bazelrc?) overrides the rule's level:")
        for w in wrong:
            print("  " + w)
        return 1
    print(f"check_opt_levels: {checked} sources of {len(rules)} rules "
          "compiled at their rules' levels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
