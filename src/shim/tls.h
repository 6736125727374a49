/*
 * tls.h - TLS through libssl (tls.c): which socket a call of the library reads or
 * writes.
 */
#ifndef SLUICE_SHIM_TLS_H
#define SLUICE_SHIM_TLS_H

#include "record.h"

/* tls.c: the SSL* whose call is under way on this thread (NULL: none).  The read
 * hooks tell it which socket the call read (sl_tls_saw), the answer reader and
 * request follower ask whether their bytes are ciphertext read or written inside
 * a call (sl_tls_in_call: 1, and the socket is noted). */
extern __thread __attribute__((tls_model("initial-exec"))) void *sl_tls_call;

int sl_tls_in_call(int fd);

void sl_tls_saw(int fd);

#endif
