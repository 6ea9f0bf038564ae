"""What the benchmarks share, a module a concern; each script imports what it uses by name
(`from common.harness import Run, report_head`):

- `harness`: the run (command, machine, date, load), its report and results files, older
  commits' trees (every benchmark);
- `corel`: Corel 5k split by the protocol with its features, a model's test figures and
  timings on it, the annotation and zero-caption studies' measures;
- `tpami`: PAMIR studies on the papers' features beside TPAMI 2008's tables;
- `latency`: whole commands timed as a person waits (two trees side by side, memory), the
  served index's latency, the large synthetic index;
- `folders`: folders of Corel pictures with their keywords in the files, and `pamir` run on
  them;
- `videos`: videos made of Corel pictures.

A benchmark runs from the checkout's root as `python benchmarks/NAME.py` (the command its
results name): Python puts the script's folder first on the path, which is how this package is
found; `pamir` is the one Python imports, the installed checkout or the one PYTHONPATH names
(benchmarks/run_all.sh names its own checkout, so that a benchmark measures the tree it sits
in).
"""
