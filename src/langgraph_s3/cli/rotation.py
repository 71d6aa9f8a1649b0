"""Commands that rotate client-side encryption keys: ``rekey`` re-wraps every data key
under another KMS key, and with ``--reencrypt`` seals threads under new data keys."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer

from langgraph_s3.cli.common import NOT_OK, OK, err, saver
from langgraph_s3.cli.manage import DryRun
from langgraph_s3.core import rewrap
from langgraph_s3.errors import S3SaverError


def rekey(
    ctx: typer.Context,
    kms_key: Annotated[
        str, typer.Option(metavar="ARN", help="the KMS key to wrap every data key under")
    ],
    previous: Annotated[
        list[str] | None,
        typer.Option(
            "--previous-kms-key", metavar="ARN", help="a KMS key that wrapped data keys (repeat)"
        ),
    ] = None,
    reencrypt: Annotated[
        list[str] | None,
        typer.Option(
            "--reencrypt",
            metavar="THREAD",
            help="re-encrypt this thread under a new data key and shred the old one "
            "instead of re-wrapping (repeat)",
        ),
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Re-wrap every thread's and tenant's data key under another KMS key (exit 1: some failed).

    KMS re-wraps each key itself (ReEncrypt): the data keys, and everything sealed under
    them, stay as they are, so nothing else is rewritten. Needs dynamodb:Scan,
    dynamodb:UpdateItem, kms:ReEncryptFrom on the previous keys and kms:ReEncryptTo on
    the new one.

    With --reencrypt (a data key may have leaked), only the threads named are
    re-encrypted: every checkpoint, pending write and blob is sealed again under a new
    data key (wrapped under --kms-key) and the old data key is shredded. Run it while
    no run writes to those threads; run it again if it stopped.

    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t rekey --kms-key NEW_ARN
    --previous-kms-key OLD_ARN
    """
    from langgraph_s3.sealing.kms import KmsKeyRing

    ring = KmsKeyRing(kms_key, previous=previous or ())
    if reencrypt:
        _reencrypt(ctx, ring, reencrypt, dry_run)
    with saver(ctx) as s:
        done = s.run(rewrap.rekey(s, ring, dry_run=dry_run))
    verb = "would re-wrap" if dry_run else "re-wrapped"
    print(
        f"{verb} {len(done.rewrapped)} data key(s); {len(done.current)} already under "
        f"{kms_key}; {len(done.failed)} failed"
    )
    for whose, version, message in done.failed:
        err.print(f"{whose}, data key {version}: {message}", markup=False)
    raise typer.Exit(NOT_OK if done.failed else OK)


def _reencrypt(ctx: typer.Context, ring: Any, threads: list[str], dry_run: bool) -> NoReturn:
    """``rekey --reencrypt``: each thread in turn; one that fails is reported (exit 1)
    and the others go on."""
    from langgraph_s3.core import datakeys
    from langgraph_s3.core.sealed import Encryption

    failed = 0
    with saver(ctx, encryption=Encryption(ring)) as s:
        for thread in dict.fromkeys(threads):
            try:
                if dry_run:
                    stored = s.run(datakeys.versions(s, datakeys.KeyScope.thread(thread)))
                    have = ", ".join(str(k.version) for k in stored) or "none"
                    print(f"would re-encrypt thread {thread!r} (data key versions: {have})")
                    continue
                done = s.reencrypt_thread(thread)
            except S3SaverError as exc:
                failed += 1
                err.print(f"thread {thread!r}: {exc}", markup=False)
                continue
            if done.version is None:
                failed += 1
                err.print(f"thread {thread!r}: no such thread", markup=False)
                continue
            print(
                f"re-encrypted thread {thread!r}: {done.checkpoints} checkpoint(s), "
                f"{done.objects} object(s) uploaded, {done.chunk_items} chunk item(s) "
                f"written, data key version {done.version}; "
                f"shredded version(s) {', '.join(map(str, done.shredded)) or 'none'}"
            )
    raise typer.Exit(NOT_OK if failed else OK)
