"""The interactive explorer notebook (run through notebooks/_build.py): the round-based core's explorer and the
elastic one. Not a figure: `hetsched reproduce` skips it."""

from __future__ import annotations

import nbformat as nbf

from _build import _write


def build_explore() -> None:
    """The interactive explorer (not a figure: `hetsched reproduce` skips it)."""
    nb = nbf.v4.new_notebook()
    nb.cells = [
        nbf.v4.new_markdown_cell("# Explore a cluster and a policy\n\nBuild a cluster (GPU types, counts, servers, "
                                 "$/h), pick a workload and a policy, press **Run**. Runs happen in the "
                                 "background (**Cancel** stops one); tick *overlay* to compare runs, each "
                                 "labelled with its policy, rate and seed; **Reset** forgets them. Charts are "
                                 "interactive (hover, zoom, click a legend entry). **Export** writes the runs "
                                 "(Parquet and CSV) and the chart to `outputs/explore/`. **Step one round** "
                                 "shows the allocation matrix and where each job runs; changing any setting "
                                 "starts the stepping over."),
        nbf.v4.new_code_cell("from hetsched.ui.widgets import Explorer\nexplorer = Explorer()\nexplorer"),
        nbf.v4.new_markdown_cell("## Elastic jobs: Sia, Pollux, Gavel+TJ\n\nOne of Sia's paper workloads (or its "
                                 "first N jobs) on node groups of GPU types (`6x4@t4+3x8@rtx+2x8@a100`, or "
                                 "`sia_hetero`, `sia_homo`). Each run adds a row and a JCT line."),
        nbf.v4.new_code_cell("from hetsched.ui.elastic_explorer import ElasticExplorer\n"
                             "elastic = ElasticExplorer()\nelastic"),
    ]
    _write(nb, "explore")
