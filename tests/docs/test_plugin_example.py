"""The plugin how-to's example test (examples/plugin), collected and run here."""
from examples.plugin.test_quiet_timeouts import test_a_timeout_is_retried_at_warning

__all__ = ["test_a_timeout_is_retried_at_warning"]
