"""Cron expressions for /schedule, pure: five fields (minute hour day-of-month month
day-of-week), each `*`, a number, a range `a-b`, a list `a,b`, with an optional step `/n`;
day-of-week 0-7 (0 and 7 are Sunday). As in cron, when both day fields are restricted a day
matches either. Shorthands: @hourly, @daily (@midnight), @weekly, @monthly, @yearly
(@annually)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from chatcli.core.errors import UsageError

SHORTHANDS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
              "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
HORIZON_DAYS = 366 * 5  # no time matches within this: the expression never fires (30 February)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is *
    any_weekday: bool  # day of week is *

    def matches(self, when: datetime.datetime) -> bool:
        if when.minute not in self.minutes or when.hour not in self.hours or when.month not in self.months:
            return False
        day = when.day in self.days
        weekday = (when.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday

    def next_after(self, when: datetime.datetime) -> datetime.datetime | None:
        """The first whole minute after `when` that matches, or None when none comes."""
        at = when.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        end = at + datetime.timedelta(days=HORIZON_DAYS)
        while at < end:
            if at.month not in self.months:
                at = (at.replace(day=1, hour=0, minute=0) + datetime.timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(at):
                at = at.replace(hour=0, minute=0) + datetime.timedelta(days=1)
                continue
            if at.hour not in self.hours:
                at = at.replace(minute=0) + datetime.timedelta(hours=1)
                continue
            if at.minute not in self.minutes:
                at += datetime.timedelta(minutes=1)
                continue
            return at
        return None

    def _day_matches(self, when: datetime.datetime) -> bool:
        day = when.day in self.days
        weekday = (when.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday


def parse(text: str) -> Cron:
    """A cron expression → Cron; UsageError saying which field is wrong."""
    given = text.strip()
    fields = SHORTHANDS.get(given.lower(), given).split()
    if len(fields) != 5:
        raise UsageError(f"'{given}' is not a cron expression: five fields (minute hour day month weekday), "
                         "such as '0 3 * * *', or @hourly, @daily, @weekly, @monthly")
    sets = [_field(part, name, low, high) for part, (name, low, high) in zip(fields, _FIELDS)]
    cron = Cron(given, sets[0], sets[1], sets[2], sets[3], frozenset(day % 7 for day in sets[4]),
                fields[2] == "*", fields[4] == "*")
    if cron.next_after(datetime.datetime(2000, 1, 1)) is None:
        raise UsageError(f"'{given}' never comes (no such date)")
    return cron


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, slash, step_text = part.partition("/")
        try:
            step = int(step_text) if slash else 1
            if body == "*":
                first, last = low, high
            elif "-" in body:
                first_text, last_text = body.split("-", 1)
                first, last = int(first_text), int(last_text)
            else:
                first = int(body)
                last = high if slash else first
        except ValueError:
            raise UsageError(f"cron {name} '{text}' is not a number, a range or *") from None
        if step < 1 or not low <= first <= last <= high:
            raise UsageError(f"cron {name} '{text}' is out of range ({low}-{high})")
        values.update(range(first, last + 1, step))
    return frozenset(values)


__all__ = ["Cron", "SHORTHANDS", "parse"]
