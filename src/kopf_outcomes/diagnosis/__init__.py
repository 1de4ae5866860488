"""Why does an object wait? Diagnosis from the objects themselves (``why``, ``stuck``: they only
read), and the callback it may wait for, from the shell (``signal``: one merge-patch)."""
