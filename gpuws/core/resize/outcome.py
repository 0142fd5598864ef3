"""What a resize ended as, typed: the CLI maps these to exit statuses in one place."""

from __future__ import annotations

from enum import StrEnum


class ResizeOutcome(StrEnum):
    """The end state of a resize (MIG or mig-parted config, or a recovery)."""

    VERIFIED = "verified"  # the target was reached and read back
    ALREADY_AT_TARGET = "already-at-target"
    DRY_RUN = "dry-run"
    REFUSED = "refused"  # nothing on the host changed (bad target, busy GPU, no confirmation)
    ROLLED_BACK = "rolled-back"  # failed; the previous layout was restored and verified
    ROLLBACK_FAILED = "rollback-failed"  # failed, and so did the restore: the host is as the message says


def worst(outcomes: list[ResizeOutcome]) -> ResizeOutcome:
    """The outcome of several GPUs: the worst of theirs (a rollback failure beats a rollback)."""
    order = [ResizeOutcome.ROLLBACK_FAILED, ResizeOutcome.ROLLED_BACK, ResizeOutcome.REFUSED,
             ResizeOutcome.VERIFIED, ResizeOutcome.DRY_RUN, ResizeOutcome.ALREADY_AT_TARGET]
    return next((o for o in order if o in outcomes), ResizeOutcome.ALREADY_AT_TARGET)
