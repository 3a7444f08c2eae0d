// Probe: is a box stored as u8 codes (a per-feature table of the training set's distinct
// values) faster to measure than a box of f32? Times η of one row against boxes picked at
// random from a buffer (far larger than the caches unless BOXES is small), three ways: the
// f32 box; u8 codes decoded by AVX-512 gathers; u8 codes compared with the row's rank among
// each feature's values, looking up only the features where the row lies outside the box
// (a share P_OUTSIDE of them). Usage: D V BOXES QUERIES P_OUTSIDE.
// gcc -O2 -march=native -o /tmp/box_codes experiments/probes/box_codes.c
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline float eta_f32(const float*lo,const float*hi,const float*x,int D){
  __m512 acc=_mm512_setzero_ps(); int d=0;
  for(;d+16<=D;d+=16){__m512 xv=_mm512_loadu_ps(x+d);
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(_mm512_loadu_ps(lo+d),xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(xv,_mm512_loadu_ps(hi+d)),_mm512_setzero_ps()));}
  if(d<D){__mmask16 m=(1u<<(D-d))-1; __m512 xv=_mm512_maskz_loadu_ps(m,x+d);
  acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(_mm512_maskz_loadu_ps(m,lo+d),xv),_mm512_setzero_ps()));
  acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(xv,_mm512_maskz_loadu_ps(m,hi+d)),_mm512_setzero_ps()));}
  return _mm512_reduce_add_ps(acc);}
// coded: codes lo/hi u8, table per feature base offset off[d] (i32), values tab (f32)
static inline float eta_u8(const uint8_t*lo,const uint8_t*hi,const float*x,const int32_t*off,const float*tab,int D){
  __m512 acc=_mm512_setzero_ps(); int d=0;
  for(;d+16<=D;d+=16){__m512 xv=_mm512_loadu_ps(x+d); __m512i o=_mm512_loadu_si512(off+d);
    __m512i li=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(lo+d))));
    __m512i hi_=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(hi+d))));
    __m512 lv=_mm512_i32gather_ps(li,tab,4), hv=_mm512_i32gather_ps(hi_,tab,4);
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(lv,xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(xv,hv),_mm512_setzero_ps()));}
  if(d<D){__mmask16 m=(1u<<(D-d))-1; __m512 xv=_mm512_maskz_loadu_ps(m,x+d); __m512i o=_mm512_maskz_loadu_epi32(m,off+d);
    __m512i li=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m,lo+d)));
    __m512i hi_=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m,hi+d)));
    __m512 lv=_mm512_mask_i32gather_ps(_mm512_setzero_ps(),m,li,tab,4), hv=_mm512_mask_i32gather_ps(_mm512_setzero_ps(),m,hi_,tab,4);
    acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(lv,xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(xv,hv),_mm512_setzero_ps()));}
  return _mm512_reduce_add_ps(acc);}
// compare trick: rle[d]=#values<=x, rlt[d]=#values<x (u8); outside low: l>=rle ; high: u<rlt
static inline float eta_cmp(const uint8_t*lo,const uint8_t*hi,const uint8_t*rle,const uint8_t*rlt,const float*x,const int32_t*off,const float*tab,int D){
  float s=0;
  for(int d=0;d<D;d+=64){int n=D-d<64?D-d:64; __mmask64 m=n==64?~0ULL:((1ULL<<n)-1);
    __m512i l=_mm512_maskz_loadu_epi8(m,lo+d), u=_mm512_maskz_loadu_epi8(m,hi+d);
    __m512i a=_mm512_maskz_loadu_epi8(m,rle+d), b=_mm512_maskz_loadu_epi8(m,rlt+d);
    uint64_t ml=_mm512_mask_cmpge_epu8_mask(m,l,a), mh=_mm512_mask_cmplt_epu8_mask(m,u,b);
    while(ml){int k=__builtin_ctzll(ml); ml&=ml-1; s+=tab[off[d+k]+lo[d+k]]-x[d+k];}
    while(mh){int k=__builtin_ctzll(mh); mh&=mh-1; s+=x[d+k]-tab[off[d+k]+hi[d+k]];}
  }
  return s;}
int main(int argc,char**argv){
  int D=atoi(argv[1]); int V=atoi(argv[2]); size_t nb=atol(argv[3]); long q=atol(argv[4]); double pout=atof(argv[5]);
  float*fb=aligned_alloc(64,nb*2*D*4+64); uint8_t*cb=aligned_alloc(64,nb*2*D+64);
  int32_t*off=malloc(D*4); float*tab=malloc(D*V*4);
  for(int d=0;d<D;d++){off[d]=d*V; for(int v=0;v<V;v++)tab[d*V+v]=(float)v/(V-1);}
  srand(3);
  // x codes: pick x value code xc; boxes contain x in a dim with prob 1-pout
  int xc[512]; float x[512]; uint8_t rle[512],rlt[512];
  for(int d=0;d<D;d++){xc[d]=rand()%V; x[d]=tab[d*V+xc[d]]; rle[d]=xc[d]+1; rlt[d]=xc[d];}
  for(size_t b=0;b<nb;b++)for(int d=0;d<D;d++){int a,c;
    if((double)rand()/RAND_MAX<pout && V>1){ if(xc[d]<V-1){a=xc[d]+1+rand()%(V-1-xc[d]); c=a+rand()%(V-a);} else {c=rand()%xc[d]; a=rand()%(c+1);} }
    else {a=rand()%(xc[d]+1); c=xc[d]+rand()%(V-xc[d]);}
    cb[b*2*D+d]=a; cb[b*2*D+D+d]=c; fb[b*2*D+d]=tab[d*V+a]; fb[b*2*D+D+d]=tab[d*V+c];}
  uint32_t*idx=malloc(q*4); for(long i=0;i<q;i++)idx[i]=((uint64_t)rand()*rand())%nb;
  for(int rep=0;rep<2;rep++){
  double t0=now(); double s=0; for(long i=0;i<q;i++){size_t b=idx[i]; s+=eta_f32(fb+b*2*D,fb+b*2*D+D,x,D);} double t1=now();
  double s2=0; for(long i=0;i<q;i++){size_t b=idx[i]; s2+=eta_cmp(cb+b*2*D,cb+b*2*D+D,rle,rlt,x,off,tab,D);} double t2=now();
  double s3=0; for(long i=0;i<q;i++){size_t b=idx[i]; s3+=eta_u8(cb+b*2*D,cb+b*2*D+D,x,off,tab,D);} double t3=now();
  printf("D %d V %d pout %.2f boxes %zu (%.0f MB f32): f32 %.1f ns/box, u8 gather %.1f ns/box, u8 cmp %.1f ns/box  (%g %g %g)\n",D,V,pout,nb,nb*2.0*D*4/1e6,(t1-t0)*1e9/q,(t3-t2)*1e9/q,(t2-t1)*1e9/q,s,s3,s2);}
}
