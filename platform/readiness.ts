// Whether this process still takes new work: false from SIGTERM on, so GET /readyz answers 503 and
// load balancers stop sending before the servers close. One flag per process, set once.
let draining = false;

export function markDraining(): void {
  draining = true;
}

export function isDraining(): boolean {
  return draining;
}
