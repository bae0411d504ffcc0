/* Seed 000's CPU-bound program, as a student would write it: pi from the
 * Leibniz series, ITERATIONS terms (argv[1]). The scheduling policy is
 * schedlab's to set (the program inherits it), so unlike the original it
 * takes no policy argument and forks nothing: schedlab starts one per
 * process. Prints `pi <value>` and `Time: <seconds>` of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s ITERATIONS\n", argv[0]);
		return 2;
	}
	long long n = atoll(argv[1]);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	double sum = 0.0;
	for (long long i = 0; i < n; i++)
		sum += (i % 2 ? -1.0 : 1.0) / (2.0 * i + 1.0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("pi %.9f\n", 4.0 * sum);
	printf("Time: %.6f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
