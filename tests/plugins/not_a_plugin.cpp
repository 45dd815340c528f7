// A shared library with no attnlab descriptor.
extern "C" int attnlab_test_not_a_plugin() { return 42; }
