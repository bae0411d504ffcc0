#include "common.h"

static void sift(int *v, int start, int end) {
    int root = start;
    while (2 * root + 1 <= end) {
        int child = 2 * root + 1, swap = root;
        if (v[swap] < v[child]) swap = child;
        if (child + 1 <= end && v[swap] < v[child + 1]) swap = child + 1;
        if (swap == root) return;
        int t = v[root]; v[root] = v[swap]; v[swap] = t;
        root = swap;
    }
}

void sort_ints(int *v, int n) {
    for (int s = (n - 2) / 2; s >= 0; s--) sift(v, s, n - 1);
    for (int end = n - 1; end > 0; end--) {
        int t = v[end]; v[end] = v[0]; v[0] = t;
        sift(v, 0, end - 1);
    }
}
