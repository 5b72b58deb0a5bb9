package org.yarnarbiter.hive;

/**
 * One {@code yarnarbiter.v1.ShareUpdate}: the arbiter's max-min fair share of the cluster for
 * one registered query (QOOP's per-query resource feedback: R / |J| over the registered jobs),
 * with the epoch it was computed at and the job count |J|.
 */
public final class ShareUpdate {
  public String jobId = "";
  /** uint64 on the wire; read as unsigned. */
  public long epoch;
  public boolean hasFairShare;
  public double vcores;
  public double memoryMb;
  public double diskMbPerS;
  public double networkMbPerS;
  /** uint32 on the wire. */
  public long activeJobs;
  /** ShareCause enum value (1 subscribed, 2 job arrived, 3 job departed, 4 capacity changed). */
  public int cause;

  /** The share as the plan log records it: fair_share.vcores, fair_share.memory_mb, active_jobs, epoch. */
  public String toJson() {
    return new Json.Obj()
        .put("job_id", jobId)
        .put("epoch", Long.toUnsignedString(epoch), true)
        .put("vcores", vcores)
        .put("memory_mb", memoryMb)
        .put("active_jobs", activeJobs)
        .toString();
  }

  @Override
  public String toString() {
    return toJson();
  }
}
