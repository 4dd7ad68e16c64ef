"""The role-name rule.

A role name may be anything OpenPAI accepts (`^[a-zA-Z_][a-zA-Z0-9_]*$`) and is used exactly as
written wherever a user sees it, including every `PAI_*` variable. Objects that must follow
Kubernetes naming (Pods, labels) use `kubernetes_name`, the name lower-cased with everything but
`[a-z0-9]` removed; so two roles of one job may not convert to the same name, and a name must keep
at least one letter or digit.
"""

from __future__ import annotations

import re

_NOT_KUBERNETES = re.compile(r"[^a-z0-9]")


def kubernetes_name(role: str) -> str:
    """The role's name in Kubernetes objects: `Param_Server` becomes `paramserver`."""
    return _NOT_KUBERNETES.sub("", role.lower())
