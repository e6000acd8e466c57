"""Operator polls shared by the Tangle operators: refuse with a reason shown on the greyed-out button, and
refuse while a bake runs in this Blender session."""

from ..session import active_session

BAKE_RUNNING = "A Tangle bake is already running"
CANCEL_BAKE_FIRST = "Cancel the running bake first"


def refuse(operator_class, reason: str) -> bool:
    """Operator poll: show ``reason`` on the greyed-out button and refuse (always returns False)."""
    operator_class.poll_message_set(reason)
    return False


def no_bake_running(operator_class, reason: str = BAKE_RUNNING) -> bool:
    """Operator poll: True while no Tangle bake runs in this Blender session, else refuse with ``reason``."""
    return active_session() is None or refuse(operator_class, reason)
