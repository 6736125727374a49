build/obj/core/match.o: src/core/match.c include/sluice/match.h \
 include/sluice/shm-t.h include/sluice/common.h
include/sluice/match.h:
include/sluice/shm-t.h:
include/sluice/common.h:
