/*
 * calendar.h - calendar windows: `rate = N/w`, `N/mo`, `N/y` (docs/config.md,
 * "Calendar windows").  A fixed window of one of these units is the calendar's own
 * - ISO weeks from Monday 00:00 UTC, months and years from their first day at
 * 00:00 UTC - so it is as long as that week, month or year is; the other
 * strategies take the unit's nominal length (sl_calendar_nominal_ns).
 */
#ifndef SLUICE_CALENDAR_H
#define SLUICE_CALENDAR_H

#include <stdint.h>

enum sl_calendar {
	SL_CAL_NONE = 0,
	SL_CAL_WEEK = 1,  /* ISO weeks: Monday 00:00 UTC to the next */
	SL_CAL_MONTH = 2, /* calendar months, UTC */
	SL_CAL_YEAR = 3,  /* calendar years, UTC */
};

/* The unit's suffix in a rate ("w", "mo", "y"); NULL for none or an unknown one. */
const char *sl_calendar_suffix(unsigned cal);

/* The unit's nominal length: 7 days, 30 days, 365 days (0 for none). */
int64_t sl_calendar_nominal_ns(unsigned cal);

/* The number of the window holding `wall_ns` (ns since 1970-01-01 00:00 UTC, may
 * be negative): weeks since the ISO week of the epoch, months since January 1970,
 * years since 1970.  An unknown calendar counts nothing (0). */
int64_t sl_calendar_index(unsigned cal, int64_t wall_ns);

/* Where window k starts (ns since the epoch), clamped to what int64 holds. */
int64_t sl_calendar_start(unsigned cal, int64_t k);

#endif
