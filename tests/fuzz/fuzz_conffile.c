/*
 * Fuzz target: --config-file's YAML (config/file.c), bytes an operator's
 * file holds. Loaded over etcd's defaults, the input is taken or refused
 * with a message naming the file (and, but for an empty message on
 * -ENOMEM, a line or the YAML problem); nothing else may come back, and
 * what was taken must be freed whole (the sanitizer build replays the
 * corpus, etcd's own etcd.conf.yml.sample among it).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cetcd_config c;
	struct config_error err = { 0 };

	if (config_init(&c))
		return 0;
	int rc = config_file_parse(&c, "fuzz.yml", data, size, &err);
	if (rc != 0 && rc != -EINVAL && rc != -ENOMEM) {
		fprintf(stderr, "fuzz_conffile: unexpected rc %d\n", rc);
		abort();
	}
	if (rc == -EINVAL && (err.exit_status != 1 || !strstr(err.msg, "config file fuzz.yml: line "))) {
		fprintf(stderr, "fuzz_conffile: a refusal without its line: %s\n", err.msg);
		abort();
	}
	config_free(&c);
	return 0;
}
