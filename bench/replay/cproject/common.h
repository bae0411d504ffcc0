#ifndef COMMON_H
#define COMMON_H
double matrix_trace(int n);
void sort_ints(int *v, int n);
unsigned long hash_bytes(const char *s, unsigned long n);
#endif
