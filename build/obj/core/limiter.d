build/obj/core/limiter.o: src/core/limiter.c include/sluice/limiter.h \
 include/sluice/shm-t.h
include/sluice/limiter.h:
include/sluice/shm-t.h:
