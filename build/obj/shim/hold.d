build/obj/shim/hold.o: src/shim/hold.c src/shim/shim.h \
 include/sluice/admit.h include/sluice/match.h include/sluice/shm-t.h \
 include/sluice/common.h include/sluice/shm.h include/sluice/config.h \
 include/sluice/clock.h
src/shim/shim.h:
include/sluice/admit.h:
include/sluice/match.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/shm.h:
include/sluice/config.h:
include/sluice/clock.h:
