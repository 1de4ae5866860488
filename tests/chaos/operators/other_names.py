"""The second operator's finalizer and storage prefix (sidefx_other.py), for the tests that look for
them: importing the operator itself would install kopf-outcomes and register its handlers in the
test process."""
FINALIZER = "chaos.example.com/other"
PREFIX = "other.chaos.example.com"
