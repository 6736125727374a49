/*
 * inflight.h - requests in flight (docs/config.md, "Requests in flight"): with
 * meter = requests, `concurrency = N` holds at most N requests outstanding across
 * the machine - written, their answers not yet read to the end.  Each request's
 * admission takes a place in its requests sections that limit concurrency; the
 * record keeps them (its stream part) and gives one back as each answer ends,
 * and all at close.  Every function runs under the record's lock.
 */
#ifndef SLUICE_SHIM_INFLIGHT_H
#define SLUICE_SHIM_INFLIGHT_H

#include "record.h"

/* The positions of rec's sections, among `mask`, that meter requests: their places
 * are a request's, the rest the connection's. */
uint64_t sl_inflight_positions(const struct sl_record *rec, uint64_t mask);

/* A request's admission took places at `taken` (positions): held until its answer
 * ends. */
void sl_inflight_took(struct sl_record *rec, uint64_t taken);

/* The connection's own places that are a request's (its first, taken with the
 * connect) become that request's. */
void sl_inflight_from_connect(struct sl_record *rec);

/* Answers read: `ended` is the parser's count of answers ended so far; each new one
 * gives back a request's places. */
void sl_inflight_answers(struct sl_record *rec, uint64_t ended);

/* A read returned data on a connection whose answers cannot be followed (turns,
 * or a parser that lost them): one request's places go back, so its requests
 * never wait on places only their own answers would free. */
void sl_inflight_turn(struct sl_record *rec);

/* Every place rec's requests hold, back (a close, a refusal, a failure). */
void sl_inflight_put_all(struct sl_record *rec);

#endif
