/* Callee-saved register checker for x86-64 SysV (see callee_saved.c).
 *
 * uint64_t ljt_call_checked(void *fn, uint64_t a1, uint64_t a2, uint64_t a3,
 *                           uint64_t a4, uint64_t out[10]);
 *
 * Saves the caller's rbx, rbp, r12-r15, loads distinct magic values into all
 * six, calls fn(a1, a2, a3, a4) and records the six registers as they are
 * right after fn returns (out[0..5] = rbx, rbp, r12, r13, r14, r15), plus
 * the stack pointer before the call (out[6]) and after it (out[7]). Then it
 * restores the caller's registers and returns fn's rax.
 *
 * This has to be assembly: C code cannot keep a chosen value in rbp across
 * a call when compiled with frame pointers (and the compiler would save and
 * restore the other registers itself, hiding a callee that clobbers them).
 * The frame is described with rsp-based CFI only, because rbp holds a magic
 * value (not a frame pointer) while fn runs.
 */
	.text
	.globl	ljt_call_checked
	.type	ljt_call_checked, @function
ljt_call_checked:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbx, 0
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r12, 0
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r13, 0
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r14, 0
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r15, 0
	pushq	%r9			/* out pointer; 7 pushes keep rsp 16-aligned */
	.cfi_adjust_cfa_offset 8
	movq	%rsp, 48(%r9)		/* out[6] = rsp before the call */
	movq	%rdi, %rax		/* fn */
	movq	%rsi, %rdi		/* a1 */
	movq	%rdx, %rsi		/* a2 */
	movq	%rcx, %rdx		/* a3 */
	movq	%r8, %rcx		/* a4 */
	movabsq	$0x0b0b0b0b1b1b1b1b, %rbx
	movabsq	$0x0d0d0d0d1d1d1d1d, %rbp
	movabsq	$0x0c0c0c0c1c1c1c12, %r12
	movabsq	$0x0c0c0c0c1c1c1c13, %r13
	movabsq	$0x0c0c0c0c1c1c1c14, %r14
	movabsq	$0x0c0c0c0c1c1c1c15, %r15
	call	*%rax
	movq	(%rsp), %r11		/* out pointer (valid only if rsp survived) */
	movq	%rbx, 0(%r11)
	movq	%rbp, 8(%r11)
	movq	%r12, 16(%r11)
	movq	%r13, 24(%r11)
	movq	%r14, 32(%r11)
	movq	%r15, 40(%r11)
	movq	%rsp, 56(%r11)		/* out[7] = rsp after the call */
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r15
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r15
	popq	%r14
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r14
	popq	%r13
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r13
	popq	%r12
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r12
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbx
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	ljt_call_checked, .-ljt_call_checked

/* Deliberately broken callees for the checker's self-test: each returns 0
 * but destroys one callee-saved register (rsp-skew variant: returns with the
 * stack pointer changed is not testable safely, so it is not provided). */
#define CLOBBER(name, reg)		\
	.globl	name;			\
	.type	name, @function;	\
name:					\
	.cfi_startproc;			\
	movq	$0x5a5a5a5a, reg;	\
	xorl	%eax, %eax;		\
	ret;				\
	.cfi_endproc;			\
	.size	name, .-name

	CLOBBER(ljt_clobber_rbx, %rbx)
	CLOBBER(ljt_clobber_rbp, %rbp)
	CLOBBER(ljt_clobber_r12, %r12)
	CLOBBER(ljt_clobber_r13, %r13)
	CLOBBER(ljt_clobber_r14, %r14)
	CLOBBER(ljt_clobber_r15, %r15)

	.section .note.GNU-stack,"",@progbits
