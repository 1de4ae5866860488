"""Why does an object wait? Read-only diagnosis from the objects themselves: ``why`` and ``stuck``."""
