/*
 * The one error slot: how the text of a failure travels with its code.
 *
 * A function that fails with something to tell an operator (which file,
 * which page, what to do) records it with errmsg_set, which returns the
 * code, so the two leave together: `return errmsg_set(-EUCLEAN, ...)`.
 * Whoever ends up holding the code asks errmsg_get(rc) for its text. Every
 * layer of every process writes the same slot (the B+tree, the key index
 * and the MVCC layer of stored, the region code of all processes), so a
 * caller never has to know which layer failed: the last failure recorded
 * on the thread is the one that returned the code, whichever layer it was.
 *
 * The slot is per thread (like errno): a failure is read on the thread
 * that saw it. It keeps the code it was recorded with, so errmsg_get never
 * hands out the text of an older, different failure: for a code that
 * recorded nothing it says strerror's text instead.
 */
#ifndef CETCD_BASE_ERRMSG_H
#define CETCD_BASE_ERRMSG_H

#include <stdarg.h>

/* Room for one message, including the NUL; longer text is truncated. */
#define ERRMSG_MAX 512

/* Records the text of the failure rc (a negative code) in the calling
 * thread's slot, replacing what was there; the arguments may include
 * errmsg_get(rc) itself, to add context to a message from below.
 * Returns rc. */
int errmsg_set(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int errmsg_vset(int rc, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* The text for the failure rc seen by the calling thread: what was
 * recorded with rc last, or strerror(-rc) when the last recording was for
 * another code. Valid until the thread records again; never NULL. */
const char *errmsg_get(int rc);

#endif
