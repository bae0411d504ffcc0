#include <stdio.h>
#include <stdlib.h>
#include "common.h"

int main(void) {
    int v[64];
    for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
    sort_ints(v, 64);
    printf("%f %d %lu\n", matrix_trace(32), v[63], hash_bytes("schedlab", 8));
    return 0;
}
