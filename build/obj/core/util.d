build/obj/core/util.o: src/core/util.c include/sluice/common.h
include/sluice/common.h:
