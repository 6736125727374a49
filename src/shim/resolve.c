/* Resolver hooks: remember which name each resolved address was asked for, so that
 * sections matching by name apply when the program connects to the address. */
#include "shim.h"

#include <errno.h>
#include <string.h>

static void learn_hostent(const char *name, const struct hostent *he)
{
	if (!he || !name || sl_is_numeric_host(name))
		return;
	if (he->h_addrtype != AF_INET && he->h_addrtype != AF_INET6)
		return;
	if (he->h_length != (he->h_addrtype == AF_INET ? 4 : 16))
		return;
	for (char **a = he->h_addr_list; a && *a; a++)
		sl_namemap_put(he->h_addrtype, *a, name);
}

SL_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                          struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **) =
		SL_REAL(getaddrinfo, getaddrinfo);
	int rc, saved;

	if (!real) {
		errno = ENOSYS;
		return EAI_SYSTEM;
	}
	rc = real(node, service, hints, res);
	if (rc != 0 || !node || !res || !sl_shim_active() || !sl_shim_has_names())
		return rc;
	saved = errno;
	if (!sl_is_numeric_host(node)) {
		for (struct addrinfo *ai = *res; ai; ai = ai->ai_next) {
			struct sl_dest d;

			if (sl_dest_from_sockaddr(&d, ai->ai_addr, ai->ai_addrlen) == 0)
				sl_namemap_put(d.family, d.addr, node);
		}
	}
	errno = saved;
	return rc;
}

SL_EXPORT struct hostent *gethostbyname(const char *name)
{
	struct hostent *(*real)(const char *) = SL_REAL(gethostbyname, gethostbyname);
	struct hostent *he;

	if (!real) {
		h_errno = NO_RECOVERY;
		return NULL;
	}
	he = real(name);
	if (he && sl_shim_active() && sl_shim_has_names())
		learn_hostent(name, he);
	return he;
}

SL_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	struct hostent *(*real)(const char *, int) = SL_REAL(gethostbyname2, gethostbyname2);
	struct hostent *he;

	if (!real) {
		h_errno = NO_RECOVERY;
		return NULL;
	}
	he = real(name, af);
	if (he && sl_shim_active() && sl_shim_has_names())
		learn_hostent(name, he);
	return he;
}

SL_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                              struct hostent **result, int *h_errnop)
{
	int (*real)(const char *, struct hostent *, char *, size_t, struct hostent **, int *) =
		SL_REAL(gethostbyname_r, gethostbyname_r);
	int rc;

	if (!real)
		return ENOSYS;
	rc = real(name, ret, buf, buflen, result, h_errnop);
	if (rc == 0 && result && *result && sl_shim_active() && sl_shim_has_names())
		learn_hostent(name, *result);
	return rc;
}

SL_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf,
                               size_t buflen, struct hostent **result, int *h_errnop)
{
	int (*real)(const char *, int, struct hostent *, char *, size_t, struct hostent **, int *) =
		SL_REAL(gethostbyname2_r, gethostbyname2_r);
	int rc;

	if (!real)
		return ENOSYS;
	rc = real(name, af, ret, buf, buflen, result, h_errnop);
	if (rc == 0 && result && *result && sl_shim_active() && sl_shim_has_names())
		learn_hostent(name, *result);
	return rc;
}
