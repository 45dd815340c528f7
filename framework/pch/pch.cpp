// Compiles the precompiled header once; every torch target reuses it.
