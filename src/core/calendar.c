/* Calendar windows (calendar.h): whole days since the epoch to and from UTC
 * dates, the Gregorian way - a year of 365 days, 366 when divisible by 4 and not
 * by 100 unless by 400; 146,097 days every 400 years.  The arithmetic is the
 * era / day-of-era method H. Hinnant describes in "chrono-Compatible Low-Level
 * Date Algorithms"; test_calendar checks it against gmtime and timegm. */
#include "sluice/calendar.h"

#define NS_PER_DAY (86400LL * 1000000000LL)
#define DAYS_PER_400Y 146097LL

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 of the first day of month m (1-12) of year y.  Years are
 * counted from March so that February, the month whose length varies, ends them:
 * the day of a date is then a fixed sum within a 400-year cycle. */
static int64_t days_of(int64_t y, int64_t m)
{
	int64_t ym = m <= 2 ? y - 1 : y;             /* the March-based year */
	int64_t era = floor_div(ym, 400);
	int64_t yoe = ym - era * 400;                 /* 0..399 */
	int64_t mp = m > 2 ? m - 3 : m + 9;           /* March = 0 .. February = 11 */
	int64_t doy = (153 * mp + 2) / 5;             /* days before the month, from March */
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; /* 0..146096 */

	return era * DAYS_PER_400Y + doe - 719468;     /* 719,468: 0000-03-01 to 1970-01-01 */
}

/* The year and month (1-12) of day d since 1970-01-01. */
static void date_of(int64_t d, int64_t *y, int64_t *m)
{
	int64_t z = d + 719468;
	int64_t era = floor_div(z, DAYS_PER_400Y);
	int64_t doe = z - era * DAYS_PER_400Y;                                /* 0..146096 */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  /* 0..399 */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                /* 0..365 */
	int64_t mp = (5 * doy + 2) / 153;                                     /* 0..11 */

	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = yoe + era * 400 + (*m <= 2);
}

const char *sl_calendar_suffix(unsigned cal)
{
	switch (cal) {
	case SL_CAL_WEEK:
		return "w";
	case SL_CAL_MONTH:
		return "mo";
	case SL_CAL_YEAR:
		return "y";
	default:
		return 0;
	}
}

int64_t sl_calendar_nominal_ns(unsigned cal)
{
	switch (cal) {
	case SL_CAL_WEEK:
		return 7 * NS_PER_DAY;
	case SL_CAL_MONTH:
		return 30 * NS_PER_DAY;
	case SL_CAL_YEAR:
		return 365 * NS_PER_DAY;
	default:
		return 0;
	}
}

int64_t sl_calendar_index(unsigned cal, int64_t wall_ns)
{
	int64_t d = floor_div(wall_ns, NS_PER_DAY), y, m;

	switch (cal) {
	case SL_CAL_WEEK:
		return floor_div(d + 3, 7); /* 1970-01-01 was a Thursday: Mondays are d + 3 = 7k */
	case SL_CAL_MONTH:
		date_of(d, &y, &m);
		return (y - 1970) * 12 + (m - 1);
	case SL_CAL_YEAR:
		date_of(d, &y, &m);
		return y - 1970;
	default:
		return 0;
	}
}

int64_t sl_calendar_start(unsigned cal, int64_t k)
{
	/* Days fit easily; their nanoseconds are clamped to what int64 holds (the
	 * year 2262), beyond which no wall clock of ours reads. */
	__int128 d;

	switch (cal) {
	case SL_CAL_WEEK:
		d = (__int128)k * 7 - 3;
		break;
	case SL_CAL_MONTH:
		k = k > 12LL * 1000000 ? 12LL * 1000000 : k < -12LL * 1000000 ? -12LL * 1000000 : k;
		d = days_of(1970 + floor_div(k, 12), k - floor_div(k, 12) * 12 + 1);
		break;
	case SL_CAL_YEAR:
		k = k > 1000000 ? 1000000 : k < -1000000 ? -1000000 : k;
		d = days_of(1970 + k, 1);
		break;
	default:
		return 0;
	}
	d *= NS_PER_DAY;
	return d > INT64_MAX ? INT64_MAX : d < INT64_MIN ? INT64_MIN : (int64_t)d;
}
