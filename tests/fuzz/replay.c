/*
 * Replays a fuzz corpus through a target's LLVMFuzzerTestOneInput without
 * libFuzzer, so that every build (and the sanitizer build in CI) runs the
 * corpus as a test. Usage: fuzz_<name> DIR_OR_FILE...
 * Exits 0 when every input was processed, 1 on an unreadable input, 77 when
 * the corpus is empty (nothing would have been tested).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(f), &st) < 0) {
		fclose(f);
		return -1;
	}
	size_t len = (size_t)st.st_size;
	/* Exact-size heap copy so ASan catches reads past the end. */
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf || fread(buf, 1, len, f) != len) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int replay_path(const char *path, unsigned *count)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[4096];
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (replay_path(sub, count) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;
	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) < 0)
			rc = 1;
	if (count == 0) {
		fprintf(stderr, "replay: no corpus inputs found\n");
		return 77;
	}
	printf("replay: %u inputs processed\n", count);
	return rc;
}
