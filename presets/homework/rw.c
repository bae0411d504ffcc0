/* Seed 000's I/O-bound program, as a student would write it: copies BYTES
 * (argv[1]) of the file `input` to `out.<pid>` in CHUNK-byte reads and
 * writes (argv[2]), through the page cache, then removes its output. The
 * policy is schedlab's to set, as for pi.c. Prints `MB/s <rate>` and
 * `Time: <seconds>` of its own. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s BYTES CHUNK\n", argv[0]);
		return 2;
	}
	long long bytes = atoll(argv[1]);
	long chunk = atol(argv[2]);
	char out[64];
	snprintf(out, sizeof out, "out.%d", (int)getpid());
	char *buf = malloc(chunk > 0 ? chunk : 1);
	int in = open("input", O_RDONLY);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct stat st;
	if (!buf || chunk <= 0 || in < 0 || fd < 0 || fstat(in, &st) || st.st_size == 0) {
		perror("rw: set-up");
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long done = 0;
	while (done < bytes) {
		long want = bytes - done < chunk ? (long)(bytes - done) : chunk;
		ssize_t got = read(in, buf, want);
		if (got == 0 && lseek(in, 0, SEEK_SET) == 0)
			continue; /* input shorter than BYTES: start it again */
		if (got < 0 || write(fd, buf, got) != got) {
			perror("rw: copy");
			return 1;
		}
		done += got;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	close(in);
	unlink(out);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("MB/s %.3f\n", bytes / 1e6 / s);
	printf("Time: %.6f\n", s);
	return 0;
}
