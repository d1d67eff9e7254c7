#!/usr/bin/python3
"""Samples each network-namespace host's link counters into
RUN_DIR/HOST/net-HOST.jsonl: the psgd package's python/psgd/netns_sampler.py
(which `psgd launch --netns` runs), run from this repository:

    netns_sampler.py --run_dir=DIR --hosts=h0,h1,h2 [--interval=1]
"""
import os
import runpy

if __name__ == "__main__":
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "psgd", "netns_sampler.py"), run_name="__main__")
