/*
 * names.c - names for a static program's addresses, whose own lookups the shim
 * does not see: the config's exact names resolved here, and the host file's
 * (which a static or Go program reads itself); refreshed on a thread so the loop
 * never waits on DNS.
 */
#include "internal.h"

#include <ctype.h>

/* One entry of the host file: the address on `line` and each of its names. */
static unsigned hosts_line(char *line, struct resolved *out, unsigned k)
{
	char *save = NULL, *addr = strtok_r(line, " \t\r\n", &save), *name;
	uint8_t bin[16];
	int family;

	if (!addr || addr[0] == '#')
		return k;
	if (inet_pton(AF_INET, addr, bin) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, addr, bin) == 1)
		family = AF_INET6;
	else
		return k;
	while (k < NAMES_MAX && (name = strtok_r(NULL, " \t\r\n", &save)) && name[0] != '#') {
		size_t len = strlen(name);

		if (len && name[len - 1] == '.')
			name[--len] = '\0'; /* a rooted name is the same name */
		if (!len || len >= SL_HOST_MAX)
			continue;
		out[k].family = family;
		memset(out[k].addr, 0, sizeof(out[k].addr));
		memcpy(out[k].addr, bin, family == AF_INET ? 4 : 16);
		for (size_t i = 0; i <= len; i++)
			out[k].name[i] = (char)tolower((unsigned char)name[i]);
		k++;
	}
	return k;
}

/* The host file's names (SL_HOSTS_FILE), after the k entries of out. */
static unsigned hosts_names(struct resolved *out, unsigned k)
{
	char line[1024];
	FILE *f = fopen(SL_HOSTS_FILE, "re");

	if (!f)
		return k;
	while (k < NAMES_MAX && fgets(line, sizeof(line), f))
		k = hosts_line(line, out, k);
	fclose(f);
	return k;
}

/* The config's exact names, resolved here (docs/programs.md, "What reaches what"): names[]
 * (n of them, SL_HOST_MAX each), then the host file's, into a new table; *count
 * its length.  A name resolved here comes before the host file's: it is the one
 * the config asks about. */
struct resolved *sup_resolve(const char (*names)[SL_HOST_MAX], unsigned n, unsigned *count)
{
	struct resolved *out = calloc(NAMES_MAX, sizeof(*out));
	unsigned k = 0;

	if (!out)
		return NULL;
	for (unsigned i = 0; i < n && k < NAMES_MAX; i++) {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *r;

		if (getaddrinfo(names[i], NULL, &hints, &res) != 0)
			continue;
		for (r = res; r && k < NAMES_MAX; r = r->ai_next) {
			struct sl_dest d;

			if (sl_dest_from_sockaddr(&d, r->ai_addr, r->ai_addrlen) < 0)
				continue;
			out[k].family = d.family;
			memcpy(out[k].addr, d.addr, sizeof(d.addr));
			snprintf(out[k].name, sizeof(out[k].name), "%s", names[i]);
			k++;
		}
		freeaddrinfo(res);
	}
	*count = hosts_names(out, k);
	return out;
}

void sup_job_put(struct names_job *j)
{
	int last;

	pthread_mutex_lock(&j->lock);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last) {
		free(j->names);
		free(j->out);
		free(j);
	}
}

static void *resolver(void *arg)
{
	struct names_job *j = arg;
	unsigned n = 0;
	struct resolved *out = sup_resolve((const char (*)[SL_HOST_MAX])j->names, j->nnames, &n);

	pthread_mutex_lock(&j->lock);
	j->out = out;
	j->nout = n;
	if (!j->orphaned)
		ev_async_send(j->loop, j->ready);
	pthread_mutex_unlock(&j->lock);
	sup_job_put(j);
	return NULL;
}

/* The config's exact names, as sup_resolve() wants them; how many. */
char (*sup_config_names(const struct sl_config *cfg, unsigned *n))[SL_HOST_MAX]
{
	char (*names)[SL_HOST_MAX] = calloc(cfg->npatterns ? cfg->npatterns : 1, SL_HOST_MAX);

	*n = 0;
	for (unsigned i = 0; names && i < cfg->npatterns; i++)
		if (cfg->patterns[i].kind == SL_PAT_NAME)
			snprintf(names[(*n)++], SL_HOST_MAX, "%s", cfg->patterns[i].name);
	return names;
}

void sup_on_names(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct sl_supervisor *s = w->data;
	struct names_job *j;
	pthread_attr_t attr;
	pthread_t t;

	(void)loop;
	(void)revents;
	if (s->job || !(j = calloc(1, sizeof(*j))))
		return; /* the last refresh is still under way */
	pthread_mutex_init(&j->lock, NULL);
	j->refs = 2;
	j->loop = s->loop;
	j->ready = &s->names_ready;
	if (!(j->names = sup_config_names(s->cfg, &j->nnames))) {
		free(j);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, resolver, j) != 0) {
		free(j->names);
		free(j);
	} else {
		s->job = j;
	}
	pthread_attr_destroy(&attr);
}

/* The refresh is done: its table replaces the old one. */
void sup_on_names_ready(struct ev_loop *loop, ev_async *w, int revents)
{
	struct sl_supervisor *s = w->data;
	struct names_job *j = s->job;

	(void)loop;
	(void)revents;
	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	if (j->out) {
		free(s->names);
		s->names = j->out;
		s->nnames = j->nout;
		j->out = NULL;
	}
	pthread_mutex_unlock(&j->lock);
	s->job = NULL;
	sup_job_put(j);
}
