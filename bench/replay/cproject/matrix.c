#include "common.h"

static double a[64][64], b[64][64], c[64][64];

double matrix_trace(int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            a[i][j] = i + j;
            b[i][j] = i - j;
            c[i][j] = 0;
        }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) c[i][j] += a[i][k] * b[k][j];
    double t = 0;
    for (int i = 0; i < n; i++) t += c[i][i];
    return t;
}
