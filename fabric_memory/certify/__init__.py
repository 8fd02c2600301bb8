"""Certification: seeded synthetic sessions and Continuation QA task repositories.

``generate`` writes real Pi v3 session files (and says exactly what it wrote);
``continuation`` holds the task repositories, the ``CERT_TASK_V1`` payload and the
external oracle; ``harness`` runs the whole certification (``fabric-memory certify``)
and ``report`` holds its checks.
"""

from .continuation import (
    FIXTURES,
    TASK_MARKER,
    CertTask,
    ContinuationFixture,
    FixtureSpec,
    OracleScore,
    apply_task,
    create_fixtures,
    decode_task,
    encode_task,
    run_oracle,
    task_message,
)
from .generate import (
    RICH_TARGET_BYTES,
    Call,
    CorpusManifest,
    OperationSpec,
    RareFact,
    SessionBuilder,
    WrittenOperation,
    WrittenSession,
    build_session,
    generate_corpus,
    rich_session,
    write_session,
)
from .harness import Components, Config, certify
from .report import Check, Report

__all__ = [
    "FIXTURES",
    "RICH_TARGET_BYTES",
    "TASK_MARKER",
    "Call",
    "CertTask",
    "Check",
    "Components",
    "Config",
    "ContinuationFixture",
    "CorpusManifest",
    "FixtureSpec",
    "OperationSpec",
    "OracleScore",
    "RareFact",
    "Report",
    "SessionBuilder",
    "WrittenOperation",
    "WrittenSession",
    "apply_task",
    "build_session",
    "certify",
    "create_fixtures",
    "decode_task",
    "encode_task",
    "generate_corpus",
    "rich_session",
    "run_oracle",
    "task_message",
    "write_session",
]
