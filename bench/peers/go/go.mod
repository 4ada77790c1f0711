module gmprtbench

go 1.19
