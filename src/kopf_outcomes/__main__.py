"""``python -m kopf_outcomes``: the ``kopf-outcomes`` command line, for environments without its script."""
from kopf_outcomes.cli import main

if __name__ == "__main__":
    main(prog_name="kopf-outcomes")
