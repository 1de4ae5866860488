"""
Benchmarks of kopf-outcomes beside stock Kopf, in one run, on the same API server.

    .venv/bin/python -m benchmarks run [--quick] [--out benchmarks/results/report.json]

Scenarios (each records stock, ours and their ratio; see ``benchmarks/README.md``):

- ``overhead`` — the cost of one handler run, in process: the patched path vs stock Kopf;
- ``instructions`` — the same runs counted in CPU instructions under valgrind (deterministic);
- ``latency`` — the seed story: callback-to-gone, ``Pending`` vs ``TemporaryError`` polling;
- ``writes`` — API writes per waiting object, counted at the API server;
- ``scale`` — many waiting objects: RSS, idle CPU and wake-up latency.
"""
