/* The refund list of a section (refund.h). */
#include "sluice/refund.h"
#include "sluice/common.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int add_code(struct sl_refund *r, unsigned code, char *why, size_t whysize)
{
	for (unsigned i = 0; i < r->ncodes; i++)
		if (r->codes[i] == code)
			return 0;
	if (r->ncodes >= SL_REFUND_CODES) {
		snprintf(why, whysize, "at most %d statuses one by one (a class such as 5xx counts as none)",
		         SL_REFUND_CODES);
		return -1;
	}
	r->codes[r->ncodes++] = (uint16_t)code;
	return 0;
}

int sl_refund_parse(const char *text, struct sl_refund *r, char *why, size_t whysize)
{
	const char *p = text;

	memset(r, 0, sizeof(*r));
	while (isspace((unsigned char)*p))
		p++;
	if (strcmp(p, "none") == 0)
		return 0;
	for (;;) {
		char item[16];
		size_t n = 0;

		while (isspace((unsigned char)*p))
			p++;
		while (*p && *p != ',' && !isspace((unsigned char)*p) && n < sizeof(item) - 1)
			item[n++] = (char)tolower((unsigned char)*p++);
		item[n] = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (strcmp(item, "failed") == 0) {
			r->classes |= SL_REFUND_FAILED;
		} else if (n == 3 && item[0] >= '1' && item[0] <= '5' && item[1] == 'x' && item[2] == 'x') {
			r->classes |= (uint8_t)(1u << (item[0] - '0'));
		} else if (n == 3 && isdigit((unsigned char)item[0]) && isdigit((unsigned char)item[1]) &&
		           isdigit((unsigned char)item[2]) && item[0] >= '1' && item[0] <= '5') {
			if (add_code(r, (unsigned)((item[0] - '0') * 100 + (item[1] - '0') * 10 + (item[2] - '0')), why,
			             whysize) < 0)
				return -1;
		} else {
			snprintf(why, whysize, "'%s' is not a status (304), a class (5xx) or failed", item);
			return -1;
		}
		if (*p == '\0')
			break;
		if (*p++ != ',') {
			snprintf(why, whysize, "items are separated by commas");
			return -1;
		}
	}
	return 0;
}

void sl_refund_format(const struct sl_refund *r, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < SL_MIN(r->ncodes, (unsigned)SL_REFUND_CODES) && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%u", len ? ", " : "", r->codes[i]);
	for (unsigned c = 1; c <= 5 && len < size; c++)
		if (r->classes & (1u << c))
			len += (size_t)snprintf(buf + len, size - len, "%s%uxx", len ? ", " : "", c);
	if ((r->classes & SL_REFUND_FAILED) && len < size)
		len += (size_t)snprintf(buf + len, size - len, "%sfailed", len ? ", " : "");
	if (!len)
		snprintf(buf, size, "none");
}

int sl_refund_status(const struct sl_refund *r, unsigned status)
{
	if (status >= 100 && status < 600 && (r->classes & (1u << (status / 100))))
		return 1;
	for (unsigned i = 0; i < SL_MIN(r->ncodes, (unsigned)SL_REFUND_CODES); i++)
		if (r->codes[i] == status)
			return 1;
	return 0;
}
