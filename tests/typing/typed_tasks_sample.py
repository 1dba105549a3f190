"""Checked by mypy in tests/unit/test_task_typing.py: lines ending in `# error` must be rejected."""

from __future__ import annotations

from conveyor import Conveyor, Job, Task

app = Conveyor("redis://localhost:6379/0")


@app.task(queue="mail", max_attempts=5)
def send_email(to: str, subject: str = "", *, urgent: bool = False) -> bool:
    return bool(to and subject) or urgent


@app.task
async def fetch(url: str) -> int:
    return len(url)


def uses() -> None:
    typed: Task[[str, str], bool] = send_email  # noqa: F841 - only the type is checked
    job: Job = send_email.enqueue("a@example.org", subject="hi", urgent=True)
    spec = send_email.with_options(delay=5).spec(to="a@example.org")
    ok: bool = send_email("a@example.org")
    print(job, spec, ok)
    send_email.enqueue(to=42)  # error
    send_email.enqueue("a@example.org", subjet="typo")  # error
    send_email.enqueue()  # error
    send_email.enqueue("a", "b", True)  # error
    fetch.enqueue(url=b"bytes")  # error
    wrong: str = send_email("x")  # error
    print(wrong)


async def async_uses() -> None:
    job: Job = await fetch.aenqueue("https://example.org")
    await fetch.aenqueue(1)  # error
    print(job)
