from utils.progress import Progress


def test_lines_carry_count_rate_and_eta_and_respect_the_interval():
    now = [0.0]
    lines = []
    progress = Progress("docs", total=100, interval=5.0, log=lines.append, clock=lambda: now[0])
    now[0] = 2.0
    progress.update(10)
    assert lines == []  # under the interval
    now[0] = 10.0
    progress.update(15)
    # 25 done in 10 s: 2.5/s, 75 left -> 30 s.
    assert lines == ["docs: 25/100 (25.0%), 2.5/s, ETA 0:30"]
    now[0] = 40.0
    progress.update(75)
    assert progress.done() == "docs: 100 done in 0:40 (2.5/s)"


def test_unknown_total_has_no_eta():
    now = [0.0]
    progress = Progress("records", interval=1.0, log=lambda _: None, clock=lambda: now[0])
    now[0] = 4.0
    progress.update(8)
    assert progress.line() == "records: 8, 2.0/s"
