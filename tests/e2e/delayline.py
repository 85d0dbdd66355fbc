# A delay line for kernels without netem: run it in a router namespace. It
# creates the TUN device NAME; every packet routed into it comes back out
# DELAY_MS later, with its TTL / hop limit raised by one so that the router
# forwarding it twice (into the TUN, then on) still counts as one hop.
#   delayline.py NAME DELAY_MS      (prints "ready" once the device exists)
import fcntl, heapq, os, select, struct, sys, time

TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000
name, delay = sys.argv[1], float(sys.argv[2]) / 1000.0
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
os.set_blocking(fd, False)


def one_more_hop(p):
    p = bytearray(p)
    if p and p[0] >> 4 == 4 and len(p) >= 20 and p[8] < 255:
        p[8] += 1
        ihl = (p[0] & 15) * 4
        p[10:12] = b"\0\0"
        s = sum(struct.unpack(f"!{ihl // 2}H", bytes(p[:ihl])))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        p[10:12] = struct.pack("!H", ~s & 0xFFFF)
    elif p and p[0] >> 4 == 6 and len(p) >= 40 and p[7] < 255:
        p[7] += 1
    return bytes(p)


queue, n = [], 0
print("ready", flush=True)
while True:
    wait = max(0.0, queue[0][0] - time.monotonic()) if queue else 1.0
    readable, _, _ = select.select([fd], [], [], wait)
    if readable:
        now = time.monotonic()
        while True:
            try:
                pkt = os.read(fd, 65536)
            except BlockingIOError:
                break
            heapq.heappush(queue, (now + delay, n, one_more_hop(pkt)))
            n += 1
    now = time.monotonic()
    while queue and queue[0][0] <= now:
        os.write(fd, heapq.heappop(queue)[2])
